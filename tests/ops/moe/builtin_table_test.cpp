// The built-in MoE table (ops/moe/builtin_table.h): the tuner's table as built, fused_moe's
// default unless the caller names another table or none, for the sm_90a devices its entries name
// ("NVIDIA H200", "NVIDIA H100 80GB HBM3").
#include "ops/moe/builtin_table.h"

#include "ops/moe/fused_moe.h"

#include "test_support.h"

#include <doctest/doctest.h>
#include <llvm/Support/FormatVariadic.h>

#include <set>

using namespace specjit;
using namespace specjit::ops;

namespace {

const Arch k_sm90a{9, 0, true};
const runtime::DeviceFacts k_h200 = runtime::DeviceFacts::for_target(k_sm90a, "NVIDIA H200");
const runtime::DeviceFacts k_h100 =
    runtime::DeviceFacts::for_target(k_sm90a, "NVIDIA H100 80GB HBM3");
const std::string k_table_path =
    std::string(SPECJIT_SOURCE_DIR) + "/ops/moe/tables/moe-configs.json";

const MoeShape k_reference_shapes[] = {{128, 8, 2048, 768, MoeDType::fp8},
                                       {8, 2, 4096, 14336, MoeDType::fp8},
                                       {256, 8, 7168, 256, MoeDType::fp8}};

std::set<std::pair<std::string, std::vector<int64_t>>> variants(const MoeShape& shape,
                                                                const FusedMoeOptions& options,
                                                                int64_t tokens,
                                                                MoeWeightLayout weights) {
  auto requests = fused_moe_variants(shape, options, k_h200, {tokens}, weights);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  std::set<std::pair<std::string, std::vector<int64_t>>> out;
  for (const runtime::VariantRequest& r : *requests)
    out.insert({r.def.id, r.values});
  return out;
}

} // namespace

TEST_CASE("the built-in MoE table is ops/moe/tables/moe-configs.json, byte for byte") {
  CHECK(builtin_moe_config_table_json() == llvm::StringRef(test::read_file(k_table_path)));
  auto parsed = parse_moe_config_table(builtin_moe_config_table_json());
  REQUIRE_MESSAGE(static_cast<bool>(parsed), llvm::toString(parsed.takeError()));
  const MoeConfigTable& table = builtin_moe_config_table();
  CHECK(table.entries.size() == parsed->entries.size());
  // The entry that serves `shape` on `device` with `weights`: named `name`, ending at 4096, and
  // every bucket a configuration the kernels can run (resolve_moe_config checks it).
  auto served = [&](const MoeShape& shape, const runtime::DeviceFacts& device,
                    MoeWeightLayout weights, const char* name) {
    const MoeConfigEntry* entry = table.find(shape, device, weights);
    REQUIRE(entry != nullptr);
    CHECK(entry->device == name);
    CHECK(entry->buckets.back().max_tokens == 4096);
    for (const MoeConfigBucket& bucket : entry->buckets) {
      auto resolved = resolve_moe_config(shape, bucket.max_tokens, device, &table, weights);
      REQUIRE_MESSAGE(static_cast<bool>(resolved), llvm::toString(resolved.takeError()));
      CHECK(resolved->config == bucket.config);
    }
    return entry;
  };
  // On the H200 each reference shape has an entry of each weight layout.
  for (const MoeShape& shape : k_reference_shapes)
    for (MoeWeightLayout weights : {MoeWeightLayout::row_major, MoeWeightLayout::packed})
      CHECK(served(shape, k_h200, weights, "NVIDIA H200")->weights == weights);
  // The H100's entries: row-major weights only, so packed weights take the row-major entry.
  for (const MoeShape& shape : k_reference_shapes) {
    const MoeConfigEntry* entry =
        served(shape, k_h100, MoeWeightLayout::row_major, "NVIDIA H100 80GB HBM3");
    CHECK(entry->weights == MoeWeightLayout::row_major);
    CHECK(served(shape, k_h100, MoeWeightLayout::packed, "NVIDIA H100 80GB HBM3") == entry);
  }
}

TEST_CASE("fused_moe runs the built-in table unless told otherwise") {
  FusedMoeOptions options;
  CHECK(options.table == &builtin_moe_config_table());
  // A table read from the file gives the same variants as the default options, at every bucket
  // of every reference shape and layout.
  auto file_table = parse_moe_config_table(test::read_file(k_table_path));
  REQUIRE(static_cast<bool>(file_table));
  FusedMoeOptions from_file;
  from_file.table = &*file_table;
  FusedMoeOptions rule;
  rule.table = nullptr;
  int differ_from_rule = 0;
  for (const MoeShape& shape : k_reference_shapes)
    for (MoeWeightLayout weights : {MoeWeightLayout::row_major, MoeWeightLayout::packed})
      for (int64_t tokens : {1, 4, 16, 64, 256, 1024, 4096}) {
        INFO("T = " << tokens);
        const auto builtin = variants(shape, options, tokens, weights);
        CHECK(builtin == variants(shape, from_file, tokens, weights));
        differ_from_rule += builtin != variants(shape, rule, tokens, weights);
      }
  // nullptr is the default rule, which the tuned table departs from at most of the 42 buckets
  // (at all of them in the table as tuned).
  CHECK(differ_from_rule > 21);
}

TEST_CASE("shapes, archs and devices the built-in table lacks take the default rule") {
  const MoeConfigTable& table = builtin_moe_config_table();
  const MoeShape other{64, 8, 2048, 768, MoeDType::fp8};
  const MoeShape qwen3 = k_reference_shapes[0];
  using runtime::DeviceFacts;
  // Another shape; other archs; sm_90a devices of another name, or of none (a precompile that
  // names no device).
  for (const auto& [shape, target] :
       {std::pair{other, k_h200}, std::pair{qwen3, DeviceFacts::for_target(Arch{8, 0, false})},
        std::pair{qwen3, DeviceFacts::for_target(Arch{9, 0, false}, "NVIDIA H200")},
        std::pair{qwen3, DeviceFacts::for_target(k_sm90a, "NVIDIA H100 PCIe")},
        std::pair{qwen3, DeviceFacts::for_target(k_sm90a)}}) {
    CHECK(table.find(shape, target) == nullptr);
    for (int64_t tokens : {1, 64, 4096}) {
      auto builtin = resolve_moe_config(shape, tokens, target, &table);
      auto rule = resolve_moe_config(shape, tokens, target, nullptr);
      REQUIRE(static_cast<bool>(builtin));
      REQUIRE(static_cast<bool>(rule));
      CHECK(builtin->config == rule->config);
      CHECK(builtin->bounds == default_moe_buckets());
    }
  }
}

TEST_CASE("a table's entry for a device comes before an entry for any device of the arch") {
  const MoeShape qwen3 = k_reference_shapes[0];
  MoeConfigEntry any{qwen3, k_sm90a, {{16, default_moe_config(qwen3, 16, k_sm90a)}}};
  MoeConfigEntry h200 = any;
  h200.device = "NVIDIA H200";
  h200.buckets = {{4, default_moe_config(qwen3, 4, k_sm90a)}};
  MoeConfigTable table;
  table.entries = {any, h200};
  CHECK(table.find(qwen3, k_h200)->device == "NVIDIA H200");
  CHECK(table.find(qwen3, runtime::DeviceFacts::for_target(k_sm90a, "NVIDIA H100 PCIe"))
            ->device.empty());
  CHECK(table.find(qwen3, k_sm90a)->device.empty()); // no device named
  // Written and read back with its device.
  auto parsed = parse_moe_config_table(llvm::formatv("{0}", moe_config_table_to_json(table)).str());
  REQUIRE(static_cast<bool>(parsed));
  CHECK(parsed->entries[1].device == "NVIDIA H200");
  CHECK(parsed->entries[0].device.empty());
}
