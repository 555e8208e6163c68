// The "moe" model type of precompile manifests: every kernel of the layer for every bucket's
// tile configuration, exactly what the op's plan launches (ops/moe/plan.h), tensor-parallel
// sharding of the intermediate size, and clear errors.
#include "deploy/manifest.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/plan.h"

#include "test_support.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;
using namespace specjit::ops;

namespace {

std::vector<VariantRequest> parse(const std::string& text) {
  auto requests = parse_manifest(text, "m.json");
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return std::move(*requests);
}

std::string parse_error(const std::string& text) {
  auto requests = parse_manifest(text, "m.json");
  REQUIRE(!requests);
  return llvm::toString(requests.takeError());
}

int64_t value_of(const VariantRequest& r, const std::string& name) {
  for (size_t p = 0; p < r.def.params.size(); ++p)
    if (r.def.params[p].name == name)
      return r.values[p];
  return -1;
}

struct Reference {
  const char* name;
  MoeShape shape; // intermediate per shard
  int64_t tp;
};
const Reference k_references[] = {
    {"qwen3-30b-a3b", {128, 8, 2048, 768, MoeDType::fp8}, 1},
    {"mixtral-8x7b", {8, 2, 4096, 14336, MoeDType::fp8}, 1},
    {"deepseek-v3-tp8", {256, 8, 7168, 256, MoeDType::fp8}, 8},
};

// A variant's identity as the engine keys it: the kernel and its compiled-in values.
std::string identity(const VariantRequest& r) {
  std::string key = r.def.id;
  for (size_t p = 0; p < r.values.size(); ++p)
    key += fmt::format(
        "|{}", r.def.params[p].policy.kind == runtime::PolicyKind::dynamic ? 0 : r.values[p]);
  return key;
}

std::set<std::string> identities(const std::vector<VariantRequest>& requests) {
  std::set<std::string> out;
  for (const VariantRequest& r : requests)
    out.insert(identity(r));
  return out;
}

// What `specjit precompile` prepares for the model's `moe` manifest entry (on `device`, when it
// names one).
std::set<std::string> precompiled(const Reference& ref, MoeDType dtype, MoeWeightLayout layout,
                                  const std::string& device) {
  const std::string manifest = fmt::format(
      R"({{"models": [{{"type": "moe", "experts": {}, "top_k": {}, "hidden": {},
          "intermediate": {}, "tp": {}, "dtype": "{}", "weights": "{}"{}}}]}})",
      ref.shape.experts, ref.shape.top_k, ref.shape.hidden, ref.shape.intermediate * ref.tp, ref.tp,
      moe_dtype_name(dtype).str(), moe_weight_layout_name(layout).str(),
      device.empty() ? "" : fmt::format(R"(, "device": "{}")", device));
  auto requests = deploy::parse_manifest(manifest, "m.json");
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return identities(*requests);
}

} // namespace

TEST_CASE("a moe model derives every kernel for every bucket's configuration") {
  // 64 experts: a shape the built-in table lacks, so the default rule's buckets.
  auto requests = parse(R"({"models": [{"type": "moe", "experts": 64, "top_k": 8,
      "hidden": 2048, "intermediate": 768, "dtype": "fp8"}]})");
  std::map<std::string, int> per_kernel;
  std::set<std::vector<int64_t>> gemm1_configs;
  int gemm1_variants = 0;
  for (const VariantRequest& r : requests) {
    ++per_kernel[r.def.id];
    // FP8 GEMM1: e4m3 MMAs over the whole K at every bucket.
    if (r.def.id == "moe_wgmma1_fp8" || r.def.id == "moe_wgmma1_e4m3w") {
      CHECK(value_of(r, "n") == 768);
      CHECK(value_of(r, "k") == 2048);
      gemm1_configs.insert({r.values.begin(), r.values.end() - 1});
      ++gemm1_variants;
    }
    if (r.def.id == "moe_wgmma2_fp8" || r.def.id == "moe_wgmma2_e4m3w") {
      CHECK(value_of(r, "n") == 2048);
      CHECK(value_of(r, "k") == 768);
    }
  }
  CHECK(per_kernel["moe_route"] == 1); // num_tokens is dynamic: one routing variant
  CHECK(per_kernel["moe_reduce"] == 1);
  CHECK(per_kernel.count("moe_wgmma1_bf16") == 0);
  CHECK(per_kernel.count("moe_gemm1_fp8") == 0); // sm_90a: wgmma at every bucket
  // One GEMM variant per distinct configuration among the default buckets.
  std::set<std::vector<int64_t>> expected;
  ops::MoeShape shape{64, 8, 2048, 768, ops::MoeDType::fp8};
  std::set<int> block_ms;
  for (int64_t bucket : ops::default_moe_buckets()) {
    ops::MoeTileConfig c = ops::default_moe_config(shape, bucket);
    // The orientation, the schedule and the weights' reads (row-major) by their values.
    expected.insert({768, 2048, c.gemm1.swap_ab ? 1 : 0, c.block_m, c.gemm1.block_n,
                     c.gemm1.warpgroups, c.gemm1.stages, c.gemm1.split_k,
                     static_cast<int64_t>(c.gemm1.schedule), c.gemm1.tiles, 0});
    block_ms.insert(c.block_m);
  }
  CHECK(gemm1_configs == expected);
  CHECK(per_kernel["moe_align"] == static_cast<int>(block_ms.size()));
  CHECK(gemm1_variants == static_cast<int>(expected.size()));
  // Every bucket's GEMM1 on e4m3 tensor cores over the whole K (the exact f16 path: none).
  CHECK(per_kernel["moe_wgmma1_e4m3w"] == gemm1_variants);
  CHECK(per_kernel.count("moe_wgmma1_fp8") == 0);
}

TEST_CASE("tp divides the intermediate size and num_tokens restricts the buckets") {
  auto requests = parse(R"({"models": [{"type": "moe", "experts": 256, "top_k": 8,
      "hidden": 7168, "intermediate": 2048, "tp": 8, "dtype": "bf16", "num_tokens": [1]}]})");
  int gemms = 0;
  for (const VariantRequest& r : requests) {
    if (r.def.id == "moe_wgmma1_bf16") {
      ++gemms;
      CHECK(value_of(r, "n") == 256);
    }
    CHECK(r.def.id.find("fp8") == std::string::npos);
  }
  CHECK(gemms == 1);
  // route, align, the two GEMMs, reduce and the weights' packing (wgmma GEMMs read packed ones).
  CHECK(requests.size() == 6);
}

TEST_CASE("the example manifests derive the three reference models") {
  for (const char* name : {"qwen3-30b-a3b.json", "mixtral-8x7b.json", "deepseek-v3-tp8.json"}) {
    CAPTURE(name);
    const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/examples/manifests/" + name;
    auto requests = parse_manifest(test::read_file(path), path);
    REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
    std::set<std::string> kernels;
    for (const VariantRequest& r : *requests)
      kernels.insert(r.def.id);
    CHECK(kernels.count("moe_route") == 1);
    CHECK(kernels.count("moe_align") == 1);
    CHECK(kernels.count("moe_reduce") == 1);
    // GEMM1 on wgmma: f16 MMAs (fp8, bf16) or e4m3 ones (e4m3, e4m3w), as the table's tiles say.
    CHECK(std::any_of(kernels.begin(), kernels.end(),
                      [](const std::string& id) { return id.starts_with("moe_wgmma1_"); }));
    CHECK(kernels.count("moe_pack_weights") == 1); // precompiled for callers that pack at load
  }
}

TEST_CASE("a moe model's weights field takes row_major or packed") {
  for (const char* weights : {"row_major", "packed"}) {
    CAPTURE(weights);
    auto requests = parse(std::string(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2,
        "hidden": 4096, "intermediate": 14336, "num_tokens": [1], "weights": ")") +
                          weights + R"("}]})");
    CHECK(requests.size() >= 5);
  }
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
      "intermediate": 14336, "weights": "tiled"}]})")
            .find("weights") != std::string::npos);
}

TEST_CASE("a moe model's accumulation field picks FP8 GEMM1's kernel at prefill") {
  auto gemm1 = [](const std::string& accumulation) {
    std::string text = R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
        "intermediate": 14336, "device": "NVIDIA H200", "num_tokens": [4096])";
    if (!accumulation.empty())
      text += R"(, "accumulation": ")" + accumulation + "\"";
    text += "}]}";
    std::set<std::string> ids;
    for (const VariantRequest& r : parse(text))
      if (r.def.id.rfind("moe_wgmma1", 0) == 0)
        ids.insert(r.def.id);
    return ids;
  };
  // The H200 table's Mixtral T = 4096 tile runs on e4m3 tensor cores over the whole K (on the
  // sorted copy of the tokens) unless exact is asked for.
  CHECK(gemm1("") == std::set<std::string>{"moe_wgmma1_e4m3w"});
  CHECK(gemm1("e4m3") == std::set<std::string>{"moe_wgmma1_e4m3w"});
  CHECK(gemm1("exact") == std::set<std::string>{"moe_wgmma1_fp8"});
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
      "intermediate": 14336, "accumulation": "fp16"}]})")
            .find("accumulation") != std::string::npos);
}

TEST_CASE("moe models report bad fields with their line") {
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
      "intermediate": 14336, "dtype": "fp16"}]})")
            .find("dtype") != std::string::npos);
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
      "intermediate": 14336, "tp": 3}]})")
            .find("not divisible by tp 3") != std::string::npos);
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 2,
      "intermediate": 14336}]})")
            .find("m.json:1: field 'models[0].hidden': missing") != std::string::npos);
  CHECK(parse_error(R"({"models": [{"type": "moe", "experts": 8, "top_k": 9, "hidden": 4096,
      "intermediate": 14336}]})")
            .find("top_k") != std::string::npos);
}

TEST_CASE("a moe model for the H200 derives the tuned table's variants, named or built in") {
  // The example manifest names the device; its table is the built-in one.
  const std::string path =
      std::string(SPECJIT_SOURCE_DIR) + "/docs/examples/manifests/qwen3-30b-a3b.json";
  const std::string example = test::read_file(path);
  REQUIRE(example.find(R"("device": "NVIDIA H200")") != std::string::npos);
  auto requests = parse_manifest(example, path);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  const std::string table_path =
      std::string(SPECJIT_SOURCE_DIR) + "/ops/moe/tables/moe-configs.json";
  auto table = ops::parse_moe_config_table(test::read_file(table_path));
  REQUIRE(static_cast<bool>(table));
  const ops::MoeShape shape{128, 8, 2048, 768, ops::MoeDType::fp8};
  const ops::MoeConfigEntry* entry = table->find(shape, Arch{9, 0, true}, "NVIDIA H200");
  REQUIRE(entry != nullptr);
  // Every bucket's GEMM1 configuration is among the derived variants, and nothing else is.
  std::set<std::vector<int64_t>> expected, derived;
  for (const ops::MoeConfigBucket& bucket : entry->buckets) {
    const ops::GemmTile& t = bucket.config.gemm1;
    if (t.kernel == ops::MoeGemmKernel::wgmma)
      // Orientation: swap-AB on f16 tokens in token order (Qwen3's top 8), swap-AB, normal.
      expected.insert({768, 2048,
                       t.f16_tokens ? 2
                       : t.swap_ab  ? 1
                                    : 0,
                       bucket.config.block_m, t.block_n, t.warpgroups, t.stages, t.split_k,
                       static_cast<int64_t>(t.schedule), t.persistent() ? 1 : t.tiles,
                       0}); // weights: row-major
    else
      expected.insert(
          {768, 2048, bucket.config.block_m, t.block_n, t.warps_m, t.warps_n, t.stages});
  }
  bool f16_tokens = false, copy = false; // the table's f16-token buckets bring the copy kernel
  for (const ops::MoeConfigBucket& bucket : entry->buckets)
    f16_tokens |= bucket.config.gemm1.f16_tokens;
  for (const VariantRequest& r : *requests) {
    if (r.def.id == "moe_wgmma1_fp8" || r.def.id == "moe_wgmma1_e4m3" ||
        r.def.id == "moe_wgmma1_e4m3w" || r.def.id == "moe_gemm1_fp8")
      derived.insert({r.values.begin(), r.values.end() - 1});
    copy |= r.def.id == "moe_tokens_f16";
  }
  CHECK(derived == expected);
  CHECK(copy == f16_tokens);
  auto ids = [](const std::vector<VariantRequest>& list) {
    std::set<std::pair<std::string, std::vector<int64_t>>> out;
    for (const VariantRequest& r : list)
      out.insert({r.def.id, r.values});
    return out;
  };
  // The same table named by config_table derives the same variants.
  const std::string device = R"("device": "NVIDIA H200")";
  std::string named = example;
  named.insert(named.find(device) + device.size(),
               fmt::format(R"(, "config_table": "{}")", table_path));
  auto from_file = parse_manifest(named, path);
  REQUIRE_MESSAGE(static_cast<bool>(from_file), llvm::toString(from_file.takeError()));
  CHECK(ids(*from_file) == ids(*requests));
  // Without the device the H200's entries serve nothing: the default rule's variants.
  std::string unnamed = example;
  unnamed.erase(unnamed.rfind(',', unnamed.find(device)),
                unnamed.find(device) + device.size() - unnamed.rfind(',', unnamed.find(device)));
  auto rule = parse_manifest(unnamed, path);
  REQUIRE_MESSAGE(static_cast<bool>(rule), llvm::toString(rule.takeError()));
  CHECK(ids(*rule) != ids(*requests));
}

TEST_CASE("a moe model's config_table must be a readable, valid table") {
  test::TempDir dir;
  const std::string manifest = dir.path() + "/m.json";
  auto model = [](const std::string& table) {
    return R"({"models": [{"type": "moe", "experts": 8, "top_k": 2, "hidden": 4096,
      "intermediate": 14336, "dtype": "fp8", "config_table": ")" +
           table + "\"}]}";
  };
  auto error_of = [&](const std::string& table) {
    auto requests = parse_manifest(model(table), manifest);
    REQUIRE(!requests);
    return llvm::toString(requests.takeError());
  };
  std::string missing = error_of("nope.json");
  CHECK(missing.find("config_table") != std::string::npos);
  CHECK(missing.find(dir.path() + "/nope.json") != std::string::npos); // relative to the manifest
  CHECK(error_of("/dev/zero").find("is a character device; only regular files are read") !=
        std::string::npos);
  test::write_file(dir.path() + "/bad.json", R"({"entries": [{"experts": 8}]})");
  std::string bad = error_of("bad.json");
  CHECK(bad.find("config_table") != std::string::npos);
  CHECK(bad.find("missing integer") != std::string::npos);
}

TEST_CASE("every call's plan launches only variants that precompile prepares, and every bucket's "
          "plan together launch all of them but the packing kernel") {
  // The devices the built-in table has entries for, and an sm_90a device of no name (the
  // default rule).
  for (const std::string device : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", ""})
    for (const Reference& ref : k_references)
      for (MoeDType dtype : {MoeDType::fp8, MoeDType::bf16})
        for (MoeWeightLayout layout : {MoeWeightLayout::row_major, MoeWeightLayout::packed}) {
          const runtime::DeviceFacts sm90a =
              runtime::DeviceFacts::for_target(Arch{9, 0, true}, device);
          MoeShape shape = ref.shape;
          shape.dtype = dtype;
          INFO(ref.name << " " << moe_dtype_name(dtype).str() << " "
                        << moe_weight_layout_name(layout).str() << " on '" << device << "'");
          const std::set<std::string> prepared = precompiled(ref, dtype, layout, device);
          TunedMoeOptions options; // the built-in table
          auto resolved = resolve_moe_config(shape, 1, sm90a, options.table, layout);
          REQUIRE(static_cast<bool>(resolved));
          std::set<std::string> launched;
          int64_t previous = 0;
          for (int64_t bound : resolved->bounds) {
            // Both ends of the bucket and a count inside it.
            for (int64_t tokens : {previous + 1, (previous + 1 + bound) / 2, bound}) {
              auto plan = moe_detail::plan_fused_moe(shape, tokens, sm90a, options, layout);
              REQUIRE_MESSAGE(static_cast<bool>(plan), llvm::toString(plan.takeError()));
              for (const std::string& variant : identities(plan->variants())) {
                CHECK_MESSAGE(prepared.count(variant) == 1, "T = " << tokens << ": " << variant);
                launched.insert(variant);
              }
            }
            previous = bound;
          }
          // Past the last bucket: its configuration.
          auto beyond = moe_detail::plan_fused_moe(shape, 2 * previous + 3, sm90a, options, layout);
          REQUIRE(static_cast<bool>(beyond));
          for (const std::string& variant : identities(beyond->variants()))
            CHECK(prepared.count(variant) == 1);
          std::set<std::string> unlaunched;
          for (const std::string& variant : prepared)
            if (launched.count(variant) == 0)
              unlaunched.insert(variant);
          CHECK(unlaunched == std::set<std::string>{"moe_pack_weights|0"});
        }
}
