// The fused MoE layer's wgmma GEMMs (kernels_src/moe/gemm_wgmma.cu, sm_90a): the variant a
// table's GemmTile becomes for one GEMM, its kernel definition and template values, its block,
// grid and shared memory, and its launch with the argument struct of kernels_src/moe/gemm_args.h.
// Not part of the public API.
#pragma once

#include "ops/moe/detail.h"

namespace specjit::ops::moe_detail {

// One wgmma GEMM variant: every choice the kernel is compiled for, by what it means.
struct WgmmaGemm {
  int gemm = 1; // 1 (hidden x w13, SiLU-gated) or 2 (intermediate x w2)
  MoeDType dtype = MoeDType::fp8;
  int64_t n = 0; // output columns: GEMM1 I, GEMM2 H
  int64_t k = 0; // GEMM1 H, GEMM2 I
  MoeOrientation orientation = MoeOrientation::normal;
  int block_m = 0; // tokens per token block (the grouping's padding)
  int block_n = 0; // weight rows per tile (GEMM1: gate and up rows together)
  int warpgroups = 1;
  int stages = 4;
  int split_k = 1;
  MoeSchedule schedule = MoeSchedule::fixed;
  int tiles = 1; // weight tiles a CTA (fixed schedule; 1 for the persistent ones)
  MoeWeightReads weights = MoeWeightReads::row_major_map;
  bool whole_k = false; // accumulated over all of K unpromoted: GEMM1 with e4m3 (moe_wgmma1_e4m3w),
                        // FP8 GEMM2 (moe_wgmma2_e4m3w)
  bool e4m3 = false;    // FP8 GEMM1: e4m3 MMAs (moe_wgmma1_e4m3), not f16 ones on exact conversions

  // The variant GEMM `gemm` runs with `tile` (a wgmma tile) over token blocks of block_m, on
  // weights in `layout` read as `reads` says (automatic: the tile's own, else the rule).
  static WgmmaGemm of(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile,
                      MoeWeightLayout layout, MoePackedReads reads);

  // The kernel's template values (wgmma_gemm_kernel's parameters, in order).
  std::vector<int64_t> values(int64_t num_tokens) const;
  int64_t weight_rows() const { return gemm == 1 ? 2 * n : n; } // of one expert
  int64_t k_bytes() const { return k * element_bytes(dtype); }
  int output_columns() const { return gemm == 1 ? block_n / 2 : block_n; } // of a tile
  bool persistent() const { return schedule != MoeSchedule::fixed; }
  bool f16_tokens() const;
  bool swap_ab() const; // the swap-AB orientations (not normal, not normal_sorted)
  // Threads a CTA: 128 per consumer warpgroup and the producer warps, four for GEMM1 in the
  // normal orientation (it gathers 64 token rows per warpgroup and stage) or with f16 tokens
  // (256 bytes a row and stage), one otherwise (MoeWgmma::k_producer_warps).
  unsigned threads() const;
  // Dynamic shared memory: stages * (block_m + block_n) * 128 bytes (f16 tokens: 2 * block_m),
  // 1024 bytes of alignment slack, FP8 GEMM1's f16 copy of its B operand (normal: the weight
  // tile, 2 * block_n * 128; swap-AB: the token tile, 4 * warpgroups * block_m * 128; none with
  // f16 tokens or e4m3 MMAs), and the output staging of the f16-token and normal tiles; see
  // shared_bytes_with_static for the 48 KiB edge.
  unsigned shared_bytes() const;
  // Static shared memory, never less than ptxas allocates: the token block's row and slot
  // indices, two mbarriers per stage, the persistent schedules' own, up to a multiple of 1024.
  unsigned static_shared_bytes() const;
  // CTAs of the fixed schedule's 1-D grid over `blocks` token blocks: the blocks rounded up to a
  // multiple of k_grouped_blocks (both launch orders' groups divide it) x tile groups x split_k.
  int64_t fixed_ctas(int64_t blocks) const;
};

// The kernel definition: moe_wgmma{1,2}_{fp8,bf16}<n, k, orientation, block_m, block_n,
// warpgroups, stages, split_k, schedule, tiles, weights, num_tokens>, the three enumerations
// spelled by name; e4m3 (FP8 GEMM1): moe_wgmma1_e4m3, whole_k moe_wgmma1_e4m3w; FP8 GEMM2 with
// whole_k: moe_wgmma2_e4m3w; the same parameters.
runtime::KernelDef wgmma_gemm_kernel(int gemm, MoeDType dtype, bool e4m3 = false,
                                     bool whole_k = false);

// What one call's launch of a wgmma GEMM needs besides its variant.
struct WgmmaLaunch {
  int64_t blocks = 0;   // token blocks the grid covers (the worst case)
  int handoff = 0;      // GEMM1: 1 counts blocks for the hand-off; GEMM2: its target
  int group_blocks = 0; // launch order of the fixed schedule
  bool programmatic = false;
};

// Launches `g` for `tokens` tokens over the call's buffers.
llvm::Error launch_wgmma_gemm(runtime::Engine& engine, const MoeShape& shape, const WgmmaGemm& g,
                              const MoeBuffers& b, int64_t tokens, const WgmmaLaunch& how,
                              CUstream stream);

} // namespace specjit::ops::moe_detail
