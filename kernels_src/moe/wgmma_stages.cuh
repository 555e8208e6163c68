// The consumers' side of the wgmma MoE GEMMs' pipeline (moe/wgmma_pipeline.cuh): which stages
// a warpgroup takes, waiting for and releasing them, accumulator fences and zeroing, the MMA
// widths of partly filled blocks, and the stage's operand descriptors.
#pragma once

#include "moe/wgmma_pipeline.cuh"

namespace specjit_kernels {


// Stages a consumer warpgroup takes: all (normal, f16 tokens), or every k_split-th from its
// index (swap-AB with K split across warpgroups).
template <class G> __device__ __forceinline__ int moe_first_stage() {
  return G::k_split > 1 ? static_cast<int>(threadIdx.x) >> 7 : 0;
}

// Pipeline step `step` (counted over the CTA's tiles) lives in stage step % STAGES; its `full`
// barrier completes once per round of STAGES steps.
template <class G> __device__ __forceinline__ unsigned moe_stage(const MoeWgmmaBlock& b, int step) {
  return b.tiles + (step % G::k_stages_value) * G::k_stage_bytes;
}
// Waits until step `step` has landed; returns its stage's shared address.
template <class G>
__device__ __forceinline__ unsigned moe_wait_stage(const MoeWgmmaBlock& b, int step) {
  mbarrier_wait(b.full_bar + 8 * (step % G::k_stages_value), (step / G::k_stages_value) & 1);
  return moe_stage<G>(b, step);
}
// This thread no longer reads step `step`'s stage (the producer may refill it).
template <class G>
__device__ __forceinline__ void moe_release_stage(const MoeWgmmaBlock& b, int step) {
  mbarrier_arrive(b.empty_bar + 8 * (step % G::k_stages_value));
}

// A warpgroup with nothing to compute keeps the pipeline's protocol: stages k0 .. k1 - 1 each
// waited for and released, in order.
template <class G>
__device__ __forceinline__ void moe_pass_stages(const MoeWgmmaBlock& b, int step0, int k0, int k1) {
#pragma unroll 1
  for (int kt = k0; kt < k1; ++kt) {
    moe_wait_stage<G>(b, step0 + kt);
    moe_release_stage<G>(b, step0 + kt);
  }
}

// Fences the first REGS accumulators of each half (all by default; a narrower MMA than the
// tile's writes fewer, see moe_with_width).
template <class G, int REGS = G::k_acc>
__device__ __forceinline__ void moe_fence_acc(float (&acc)[G::k_halves][G::k_acc]) {
#pragma unroll
  for (int h = 0; h < G::k_halves; ++h)
    fence_registers<REGS>(acc[h]);
}

// Swap-AB: the block's tokens are wgmma's N, and the last block of an expert is often only
// partly filled (at decode, 1-20 tokens an expert in blocks of 8-32). Its MMAs then run at the
// narrowest multiple of the tile's width step (a quarter of TOK, at least 8) that covers the
// block's used rows: the tensor cores skip the padding, and the accumulators past that width
// stay zero (padding outputs, which the epilogue skips). f(MoeWidth<W>{}) runs the K loop at
// width W; the normal orientation has one width, its weight tile's.
template <int W> struct MoeWidth { static constexpr int value = W; };
template <class G, int W = G::k_width_step, class F>
__device__ __forceinline__ void moe_with_width(int used_rows, F&& f) {
  if constexpr (W >= G::k_mma_n) {
    f(MoeWidth<G::k_mma_n>{});
  } else {
    if (used_rows <= W)
      f(MoeWidth<W>{});
    else
      moe_with_width<G, W + G::k_width_step>(used_rows, f);
  }
}

// Normal orientation, two warpgroups: whether this warpgroup's 64 token rows are all padding.
// An expert's slots fill its blocks from the first row (moe_align), so this happens in the last
// block of an expert with 64 or fewer rows left; the warpgroup then skips its token loads and
// MMAs and only keeps the pipeline's protocol (and, FP8 GEMM1, converts its share of the
// weights), leaving the tensor cores to the other warpgroup.
template <class G> __device__ __forceinline__ bool moe_rows_all_padding(const MoeWgmmaBlock& b) {
  if constexpr (G::k_swap || G::k_consumers == 128)
    return false;
  else
    return b.slot_of_row[(static_cast<int>(threadIdx.x) >> 7) * 64] < 0;
}
template <class G>
__device__ __forceinline__ void moe_zero_acc(float (&acc)[G::k_halves][G::k_acc]) {
#pragma unroll
  for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
    for (int i = 0; i < G::k_acc; ++i)
      acc[h][i] = 0.0f;
}

// Descriptors of one stage's operands (k offset 0) for warpgroup `wg`, tiles of 128-byte rows.
template <class G>
__device__ __forceinline__ void moe_stage_descs(unsigned w_tile, unsigned t_tile, int w_rows,
                                                int wg, unsigned long long (&a_desc)[G::k_halves],
                                                unsigned long long& b_desc) {
  if constexpr (G::k_swap) {
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      a_desc[h] = wgmma_desc_sw128(w_tile + h * (w_rows / 2) * 128);
    b_desc = wgmma_desc_sw128(t_tile);
  } else {
    a_desc[0] = wgmma_desc_sw128(t_tile + wg * 64 * 128);
    b_desc = wgmma_desc_sw128(w_tile);
  }
}

} // namespace specjit_kernels
