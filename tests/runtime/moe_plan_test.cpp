// The fused MoE op's plan (runtime/ops/moe_plan.h): what a call launches is what precompile
// prepares, for every reference model, dtype, weight layout and token-count bucket. No GPU.
#include "runtime/manifest.h"
#include "runtime/ops/moe_plan.h"

#include "test_support.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>

using namespace specjit;
using namespace specjit::ops;
using runtime::VariantRequest;

namespace {

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
  auto requests = runtime::parse_manifest(manifest, "m.json");
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return identities(*requests);
}

} // namespace

TEST_CASE("every call's plan launches only variants that precompile prepares, and every bucket's "
          "plan together launch all of them but the packing kernel") {
  // The H200 (the built-in table's entries) and an sm_90a device of no name (the default rule).
  for (const std::string device : {"NVIDIA H200", ""})
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

TEST_CASE("a plan names the kernels of the stages it runs, in launch order") {
  const runtime::DeviceFacts sm90a =
      runtime::DeviceFacts::for_target(Arch{9, 0, true}, "NVIDIA H200");
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  TunedMoeOptions options;
  auto all = moe_detail::plan_fused_moe(qwen, 1024, sm90a, options, MoeWeightLayout::row_major);
  REQUIRE(static_cast<bool>(all));
  std::vector<std::string> kernels;
  for (const VariantRequest& r : all->variants())
    kernels.push_back(r.def.id);
  // The table's Qwen3 T = 1024 GEMM1 runs on e4m3 tensor cores; DeepSeek's at T = 1024 reads an
  // f16 copy of the tokens (below).
  CHECK(kernels == std::vector<std::string>{"moe_route", "moe_align", "moe_wgmma1_e4m3",
                                            "moe_wgmma2_fp8", "moe_reduce"});
  // Exact accumulation: the same tile on f16 MMAs.
  TunedMoeOptions exact = options;
  exact.accumulation = MoeAccumulation::exact;
  auto exact_plan = moe_detail::plan_fused_moe(qwen, 1024, sm90a, exact, MoeWeightLayout::row_major);
  REQUIRE(static_cast<bool>(exact_plan));
  CHECK(exact_plan->config.gemm1.block_n == all->config.gemm1.block_n);
  CHECK_FALSE(exact_plan->config.gemm1.e4m3);
  CHECK(exact_plan->variants()[2].def.id == "moe_wgmma1_fp8");
  options.stages = moe_stage_gemm1 | moe_stage_gemm2;
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};
  auto gemms = moe_detail::plan_fused_moe(deepseek, 1024, sm90a, options, MoeWeightLayout::row_major);
  REQUIRE(static_cast<bool>(gemms));
  kernels.clear();
  for (const VariantRequest& r : gemms->variants())
    kernels.push_back(r.def.id);
  CHECK(kernels == std::vector<std::string>{"moe_tokens_f16", "moe_wgmma1_fp8", "moe_wgmma2_fp8"});
  // GEMM2 alone has no GEMM1 of this call to follow programmatically.
  options.stages = moe_stage_gemm2;
  auto alone = moe_detail::plan_fused_moe(qwen, 1024, sm90a, options, MoeWeightLayout::row_major);
  REQUIRE(static_cast<bool>(alone));
  CHECK_FALSE(alone->programmatic);
  CHECK(all->programmatic);
}

TEST_CASE("planning refuses what the launch could not run, with no GPU") {
  const runtime::DeviceFacts sm90a = runtime::DeviceFacts::for_target(Arch{9, 0, true});
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  TunedMoeOptions options;
  options.config = MoeTileConfig{16, {64, 1, 4, 4}, {64, 1, 4, 4}}; // mma.sync tiles
  auto packed = moe_detail::plan_fused_moe(qwen, 16, sm90a, options, MoeWeightLayout::packed);
  REQUIRE_FALSE(static_cast<bool>(packed));
  CHECK(llvm::toString(packed.takeError()).find("packed weights are read by wgmma tiles") !=
        std::string::npos);
  // mma.sync tiles put token blocks on grid y: at most 65535 of them.
  auto many = moe_detail::plan_fused_moe(qwen, 200000, sm90a, options, MoeWeightLayout::row_major);
  REQUIRE_FALSE(static_cast<bool>(many));
  CHECK(llvm::toString(many.takeError()).find("at most 65535 with mma.sync tiles") !=
        std::string::npos);
}
