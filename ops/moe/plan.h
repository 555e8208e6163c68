// A fused_moe call planned on the host, without a GPU: the tile configuration of its token
// count's bucket, the token blocks its GEMM grids cover, the schedule choices, and every kernel
// variant it launches with its template values. fused_moe launches a plan and nothing else, and
// fused_moe_variants (precompile, `moe` manifest entries) prepares the variants of every bucket's
// plan, so what is precompiled and what is launched cannot drift apart. Not part of the public
// API.
#pragma once

#include "ops/moe/gemm_mma.h"
#include "ops/moe/gemm_wgmma.h"

namespace specjit::ops::moe_detail {

// One GEMM of a plan: a variant of one of the two families.
struct PlannedGemm {
  MoeGemmKernel kernel = MoeGemmKernel::mma;
  MmaGemm mma;     // kernel mma
  WgmmaGemm wgmma; // kernel wgmma
  KernelIndex index() const;
  std::vector<int64_t> values(int64_t num_tokens) const;
};

struct MoePlan {
  MoeShape shape;
  int64_t tokens = 0;
  unsigned stages = moe_stage_all;
  MoeWeightLayout layout = MoeWeightLayout::row_major;
  MoeTileConfig config;
  int64_t blocks = 0; // token blocks of block_m the GEMM grids cover (the worst case)
  MoeSlotOrder slot_order = MoeSlotOrder::any;
  int handoff = 0; // GEMM2's block hand-off target (0: GEMM2 waits for the whole of GEMM1)
  int group_blocks = k_grouped_blocks; // the fixed schedule's launch order
  bool programmatic = false;           // GEMM2 launched as a programmatic dependent of GEMM1
  int multiprocessors = 0;             // the target's: the grid-stride launches' grids
  // Template values of the stages' kernels (moe_kernels()); tokens_f16 empty: no f16 copy.
  std::vector<int64_t> route, align, tokens_f16, reduce;
  PlannedGemm gemm1, gemm2;

  const PlannedGemm& gemm(int which) const { return which == 1 ? gemm1 : gemm2; }
  bool runs(unsigned stage) const { return (stages & stage) != 0; }
  // The variants the call launches, in launch order: its stages' kernels.
  std::vector<runtime::VariantRequest> variants() const;
};

// The plan of a call of `tokens` tokens (at least 1) on `target` (the engine's device, or a
// target's documented defaults when precompiling): the table's (or the forced) configuration
// checked against the shape, and the grid limits the configuration meets at this count. Errors
// are invalid_argument, named as fused_moe's.
llvm::Expected<MoePlan> plan_fused_moe(const MoeShape& shape, int64_t tokens,
                                       const runtime::DeviceFacts& target,
                                       const TunedMoeOptions& options, MoeWeightLayout layout);

} // namespace specjit::ops::moe_detail
