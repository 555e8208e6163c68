// The fused MoE layer's mma.sync GEMMs (kernels_src/moe/gemm.cu, any arch): the variant a table's
// GemmTile becomes for one GEMM, its kernel definition and template values, its block, grid and
// shared memory, and its launch with the argument struct of kernels_src/moe/gemm_args.h. Not part
// of the public API.
#pragma once

#include "ops/moe/detail.h"

namespace specjit::ops::moe_detail {

// One mma.sync GEMM variant: a block_m x block_n tile on a warps_m x warps_n warp grid.
struct MmaGemm {
  int gemm = 1; // 1 (hidden x w13, SiLU-gated) or 2 (intermediate x w2)
  MoeDType dtype = MoeDType::fp8;
  int64_t n = 0; // output columns: GEMM1 I, GEMM2 H
  int64_t k = 0; // GEMM1 H, GEMM2 I
  int block_m = 0;
  int block_n = 0; // weight rows per tile (GEMM1: gate and up rows interleaved)
  int warps_m = 1;
  int warps_n = 4;
  int stages = 4;

  static MmaGemm of(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile);

  // The kernel's template values (mma_gemm_kernel's parameters, in order).
  std::vector<int64_t> values(int64_t num_tokens) const;
  int64_t weight_rows() const { return gemm == 1 ? 2 * n : n; } // of one expert
  unsigned threads() const { return static_cast<unsigned>(32 * warps_m * warps_n); }
  // stages * (block_m + block_n) * 128 bytes (see shared_bytes_with_static for the 48 KiB edge).
  unsigned shared_bytes() const;
  unsigned static_shared_bytes() const { return 8u * static_cast<unsigned>(block_m); } // indices
};

// The kernel definition: moe_gemm{1,2}_{fp8,bf16}<n, k, block_m, block_n, warps_m, warps_n,
// stages, num_tokens>.
runtime::KernelDef mma_gemm_kernel(int gemm, MoeDType dtype);

// Launches `g` for `tokens` tokens over the call's buffers: grid x the weight tiles, y the
// `blocks` token blocks (at most k_max_grid_y, checked by fused_moe).
llvm::Error launch_mma_gemm(runtime::Engine& engine, const MoeShape& shape, const MmaGemm& g,
                            const MoeBuffers& b, int64_t tokens, int64_t blocks, CUstream stream);

} // namespace specjit::ops::moe_detail
