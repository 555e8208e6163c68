// The MoE model type of precompile manifests (deploy/manifest.h: ModelType).
#include "deploy/manifest_moe.h"

#include "ops/moe/fused_moe.h"

#include "support/bounded_file.h"
#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <fmt/format.h>

namespace specjit::deploy {

using runtime::DeviceFacts;

namespace {

constexpr uint64_t k_max_table_bytes = 1 << 20;

// A tuned table named by a manifest: relative to the manifest's folder, a regular file of at
// most 1 MiB (never a device or a pipe), parsed and checked like the runtime's.
llvm::Expected<ops::MoeConfigTable> load_table(const ManifestFields& model, llvm::StringRef name) {
  std::string path = model.resolve_path(name);
  auto text = read_regular_file(path, "moe config table", k_max_table_bytes);
  if (!text)
    return model.error("config_table", llvm::toString(text.takeError()));
  auto table = ops::parse_moe_config_table(*text);
  if (!table)
    return model.error("config_table",
                       fmt::format("{}: {}", path, llvm::toString(table.takeError())));
  return table;
}

} // namespace

// "models": [{"type": "moe", "experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768,
//             "dtype": "fp8", "tp": 1, "renormalize": true, "num_tokens": [1, 64],
//             "arch": "sm_90a", "device": "NVIDIA H200", "config_table": "moe-configs.json",
//             "weights": "packed", "accumulation": "exact"}]
// intermediate is the whole model's; each tensor-parallel shard holds intermediate / tp. Every
// kernel of the layer x every token-count bucket's tile configuration (docs/moe.md), from the
// tuned table when one is named (a path relative to the manifest's folder), else the built-in
// one (ops/moe/builtin_table.h; the default rule for shapes it lacks): the variants the
// runtime will dispatch to with the same table on that device (the driver's name: it picks the
// table's entries made for it; none named: the entries of any device of the arch, and the arch's
// documented facts, runtime/device_facts.h) and weights (the table's entry for that layout,
// "row_major" by default) and FP8 GEMM1 accumulation ("e4m3" by default, or "exact":
// FusedMoeOptions::accumulation).
llvm::Error derive_moe_model(const ManifestFields& model, std::vector<VariantRequest>& out) {
  if (auto err =
          model.only({"type", "experts", "top_k", "hidden", "intermediate", "dtype", "tp",
                      "renormalize", "num_tokens", "arch", "device", "config_table", "weights",
                      "accumulation"}))
    return err;
  ops::MoeShape shape;
  int64_t* targets[] = {&shape.experts, &shape.top_k, &shape.hidden, &shape.intermediate};
  const char* names[] = {"experts", "top_k", "hidden", "intermediate"};
  for (int i = 0; i < 4; ++i) {
    auto value = model.integer(names[i], 1);
    if (!value)
      return value.takeError();
    *targets[i] = *value;
  }
  auto tp = model.optional_integer("tp", 1);
  if (!tp)
    return tp.takeError();
  if (*tp) {
    if (shape.intermediate % **tp != 0)
      return model.error("tp", fmt::format("intermediate {} is not divisible by tp {}",
                                           shape.intermediate, **tp));
    shape.intermediate /= **tp;
  }
  auto dtype = model.optional_string("dtype");
  if (!dtype)
    return dtype.takeError();
  if (*dtype && **dtype != "fp8" && **dtype != "bf16")
    return model.error("dtype", "expected \"fp8\" or \"bf16\"");
  shape.dtype = *dtype && **dtype == "bf16" ? ops::MoeDType::bf16 : ops::MoeDType::fp8;
  ops::FusedMoeOptions options;
  if (const llvm::json::Value* value = model.object().get("renormalize")) {
    auto flag = value->getAsBoolean();
    if (!flag)
      return model.error("renormalize", "expected true or false");
    options.renormalize = *flag;
  }
  auto accumulation = model.optional_string("accumulation");
  if (!accumulation)
    return accumulation.takeError();
  if (*accumulation) {
    auto parsed = ops::parse_moe_accumulation(**accumulation);
    if (!parsed)
      return model.error("accumulation", "expected \"e4m3\" or \"exact\"");
    options.accumulation = *parsed;
  }
  Arch arch;
  auto arch_name = model.optional_string("arch");
  if (!arch_name)
    return arch_name.takeError();
  if (*arch_name) {
    auto parsed = Arch::parse(**arch_name);
    if (!parsed)
      return model.error("arch", llvm::toString(parsed.takeError()));
    arch = *parsed;
  }
  auto device = model.optional_string("device");
  if (!device)
    return device.takeError();
  if (*device && (*device)->empty())
    return model.error("device", "expected a device's name, e.g. \"NVIDIA H200\"");
  const DeviceFacts target = DeviceFacts::for_target(arch, device->value_or(""));
  ops::MoeConfigTable table;
  auto table_path = model.optional_string("config_table");
  if (!table_path)
    return table_path.takeError();
  if (*table_path) {
    auto loaded = load_table(model, **table_path);
    if (!loaded)
      return loaded.takeError();
    table = std::move(*loaded);
    options.table = &table;
  }
  auto weights_name = model.optional_string("weights");
  if (!weights_name)
    return weights_name.takeError();
  ops::MoeWeightLayout weights = ops::MoeWeightLayout::row_major;
  if (*weights_name) {
    auto layout = ops::parse_moe_weight_layout(**weights_name);
    if (!layout)
      return model.error("weights", "expected \"row_major\" or \"packed\"");
    weights = *layout;
  }
  auto tokens = model.optional_integers("num_tokens", 1);
  if (!tokens)
    return tokens.takeError();
  auto requests = ops::fused_moe_variants(shape, options, target,
                                          tokens->value_or(std::vector<int64_t>{}), weights);
  if (!requests)
    return model.error("type", llvm::toString(requests.takeError()));
  for (VariantRequest& request : *requests)
    out.push_back(std::move(request));
  return llvm::Error::success();
}

} // namespace specjit::deploy
