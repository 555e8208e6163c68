// fused_moe on the GPU with forced tile configurations (fused_moe_support.h): every kernel family
// and orientation at every token count, the f16-token GEMM1 on the sorted copy, GEMM2 with and
// without the block hand-off, and both launch orders.
#include "engine_fixture.h"
#include "gpu/fused_moe_support.h"
#include "gpu/gpu_test_support.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::ops;
using namespace specjit::test::moe_gpu;
using specjit::runtime::Engine;
using specjit::test::require_ok;
using specjit::test::TempDir;

TEST_CASE("every GEMM kernel and orientation is right at every token count (Qwen3, DeepSeek)") {
  if (!specjit::test::gpu_or_skip("fused_moe forced tiles"))
    return;
  for (const auto& [forced, family] : k_forced_families)
    for (const Model& model : {k_qwen, as_bf16(k_qwen), k_deepseek, as_bf16(k_deepseek)}) {
      if (forced_selected(family, model.shape.dtype))
        run_model(model, forced, MoeHandoff::always); // with every schedule
      else
        MESSAGE("skipped by SPECJIT_FORCED_ONLY: " << std::string(family) << " "
                                                   << moe_dtype_name(model.shape.dtype).str());
    }
}

// The f16-token GEMM1 reads its copy of the tokens in sorted order, as TMA boxes, for models of
// top_k <= 2 (the Qwen3 and DeepSeek runs above take the token-order copy, gathered): the same
// forced tiles (fixed and dynamic schedules, one and two warpgroups, blocks of 8 to 128) on
// Mixtral.
TEST_CASE("the f16-token GEMM1 on the sorted copy is right at every token count (Mixtral)") {
  if (!specjit::test::gpu_or_skip("fused_moe sorted f16 tokens"))
    return;
  if (forced_selected("f16_tokens", MoeDType::fp8))
    run_model(k_mixtral, Forced::wgmma_f16_tokens, MoeHandoff::always);
  else
    MESSAGE("skipped by SPECJIT_FORCED_ONLY: f16_tokens fp8");
}

// The block hand-off (GEMM2 taking each token block once GEMM1 has written it) is on in every
// forced case above, and in the default FP8 ones from 32 tokens an expert on. Here, the default
// rule's tiles at every T with it never and always, the latter three calls on one workspace
// (the GEMM2 of each must leave the hand-off's counters zero for the next).
TEST_CASE("GEMM2 is right with and without the block hand-off, call after call (Qwen3, DeepSeek)") {
  if (!specjit::test::gpu_or_skip("fused_moe block hand-off"))
    return;
  for (const Model& model : {k_qwen, k_deepseek}) {
    run_model(model, Forced::none, MoeHandoff::never);
    run_model(model, Forced::none, MoeHandoff::always, 3);
  }
}

// The launch order (TunedMoeOptions::launch_order) only reorders the fixed schedule's CTAs: both
// orders forced at every T, with the hand-off always (GEMM2 then takes blocks as they complete),
// Mixtral (8 experts, where the automatic rule goes block-major) and DeepSeek (256 experts).
TEST_CASE("both launch orders are right at every token count (Mixtral, DeepSeek)") {
  if (!specjit::test::gpu_or_skip("fused_moe launch orders"))
    return;
  for (const Model& model : {k_mixtral, k_deepseek, as_bf16(k_mixtral)})
    for (MoeLaunchOrder order : {MoeLaunchOrder::grouped, MoeLaunchOrder::block_major})
      run_model(model, Forced::none, MoeHandoff::always, 1, order);
}
