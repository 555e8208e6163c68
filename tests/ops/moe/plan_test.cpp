// The fused MoE op's plan (ops/moe/plan.h): the stages' kernels in launch order, the launches
// it refuses, and the built-in table's tiles under exact accumulation, with no GPU. That it
// launches only what precompile prepares: tests/deploy/manifest_moe_test.
#include "ops/moe/builtin_table.h"
#include "ops/moe/plan.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace specjit;
using namespace specjit::ops;
using runtime::VariantRequest;

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
  // The table's Qwen3 T = 1024 GEMM1 accumulates e4m3 products over the whole K.
  CHECK(kernels == std::vector<std::string>{"moe_route", "moe_align", "moe_wgmma1_e4m3w",
                                            "moe_wgmma2_fp8", "moe_reduce"});
  // Exact accumulation: the same GEMM1 tile on f16 MMAs.
  TunedMoeOptions exact = options;
  exact.accumulation = MoeAccumulation::exact;
  auto exact_plan =
      moe_detail::plan_fused_moe(qwen, 1024, sm90a, exact, MoeWeightLayout::row_major);
  REQUIRE(static_cast<bool>(exact_plan));
  CHECK(exact_plan->config.gemm1.block_n == all->config.gemm1.block_n);
  CHECK_FALSE(exact_plan->config.gemm1.e4m3);
  CHECK(exact_plan->variants()[2].def.id == "moe_wgmma1_fp8");
  CHECK_FALSE(exact_plan->config.gemm1.whole_k);
  options.stages = moe_stage_gemm1 | moe_stage_gemm2;
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};
  // A GEMM1 on an f16 copy of the tokens (swap-AB, two warpgroups) brings the copy kernel.
  MoeTileConfig f16 = all->config;
  f16.block_m = 64;
  f16.gemm1 = GemmTile::wgmma_tile(256, 4, true, 2);
  f16.gemm1.f16_tokens = true;
  f16.gemm2 = GemmTile::wgmma_tile(128, 4, false, 1);
  options.config = f16;
  auto gemms =
      moe_detail::plan_fused_moe(deepseek, 1024, sm90a, options, MoeWeightLayout::row_major);
  REQUIRE_MESSAGE(static_cast<bool>(gemms), llvm::toString(gemms.takeError()));
  options.config.reset();
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

TEST_CASE("every bucket of the built-in table plans under exact accumulation, on f16 GEMM1 MMAs "
          "and a promoted GEMM2") {
  TunedMoeOptions exact;
  exact.accumulation = MoeAccumulation::exact;
  int rewritten = 0;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries)
    for (const MoeConfigBucket& bucket : entry.buckets) {
      INFO(entry.device << ", " << bucket.max_tokens << " tokens: " << bucket.config.describe());
      // On the device the entry names, so that its own bucket plans.
      const auto device = runtime::DeviceFacts::for_target(entry.arch, entry.device);
      auto plan =
          moe_detail::plan_fused_moe(entry.shape, bucket.max_tokens, device, exact, entry.weights);
      REQUIRE_MESSAGE(static_cast<bool>(plan), llvm::toString(plan.takeError()));
      const MoeTileConfig& c = plan->config;
      CHECK_FALSE(c.gemm1.e4m3);
      CHECK_FALSE(c.gemm1.whole_k);
      CHECK_FALSE(c.gemm1.sorted_tokens);
      CHECK_FALSE(c.gemm2.whole_k);
      // GEMM1 may lose stages to its f16 copy, a 256-wide normal GEMM2 runs 128 wide; the rest
      // is the table's.
      CHECK(c.block_m == bucket.config.block_m);
      CHECK(c.gemm1.block_n == bucket.config.gemm1.block_n);
      CHECK(c.gemm1.stages <= bucket.config.gemm1.stages);
      CHECK(c.gemm1.stages >= 2);
      CHECK(c.gemm2.stages == bucket.config.gemm2.stages);
      CHECK(c.gemm2.tiles == bucket.config.gemm2.tiles);
      if (c.gemm2.block_n != bucket.config.gemm2.block_n) {
        CHECK(bucket.config.gemm2.block_n == 256);
        CHECK(c.gemm2.block_n == 128);
        ++rewritten;
      }
      for (const VariantRequest& r : plan->variants())
        CHECK(r.def.id.find("e4m3") == std::string::npos);
    }
  // The table's 256-wide GEMM2 tiles: Qwen3 T = 4096, Mixtral T = 1024 and 4096, and their
  // packed entries where they share the row-major tiles.
  CHECK(rewritten >= 3);
}

TEST_CASE("every token count from 1 to 8192 plans on the built-in table, both accumulations, "
          "both weight layouts, and on the default rule in bf16") {
  // The table's entries (FP8, row-major and packed) on the devices they name, then their shapes
  // in bf16 (no entry: the default rule).
  struct Case {
    MoeShape shape;
    MoeWeightLayout weights;
    runtime::DeviceFacts device;
  };
  std::vector<Case> cases;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries) {
    const auto device = runtime::DeviceFacts::for_target(entry.arch, entry.device);
    cases.push_back({entry.shape, entry.weights, device});
    MoeShape bf16 = entry.shape;
    bf16.dtype = MoeDType::bf16;
    cases.push_back({bf16, entry.weights, device});
  }
  int failures = 0, planned = 0;
  for (const auto& [shape, weights, device] : cases)
    for (MoeAccumulation accumulation : {MoeAccumulation::e4m3, MoeAccumulation::exact}) {
      TunedMoeOptions options;
      options.accumulation = accumulation;
      for (int64_t tokens = 1; tokens <= 8192; ++tokens) {
        auto plan = moe_detail::plan_fused_moe(shape, tokens, device, options, weights);
        if (plan) {
          ++planned;
          continue;
        }
        if (++failures <= 5)
          FAIL_CHECK(shape.experts << " experts " << moe_dtype_name(shape.dtype).str() << ", "
                                   << tokens << " tokens, "
                                   << moe_accumulation_name(accumulation).str() << ": "
                                   << llvm::toString(plan.takeError()));
        else
          llvm::consumeError(plan.takeError());
      }
    }
  CHECK(failures == 0);
  CHECK(planned == static_cast<int>(cases.size()) * 2 * 8192);
}
