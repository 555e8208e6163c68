// The consumer warpgroups of the wgmma MoE GEMMs (moe/gemm_wgmma.cu): one K loop per operand
// precision (the f16 conversions: moe/wgmma_consume_f16.cuh; the reductions after the K loop:
// moe/wgmma_reduce.cuh).
//
// Precision. e4m3 wgmma accumulates with less than fp32 precision. Measured on the H200
// against the emulating reference (whole layer, FP8): 1.1-2.0e-2 with e4m3 wgmma over the whole
// K, 5.3e-3 promoting into fp32 registers every 128 of K, 2.2-3.5e-3 promoting after every k32
// instruction; 3e-3 is allowed, mma.sync gives 0. The error comes from GEMM1, whose output is
// requantized to e4m3 (a perturbed sum flips its rounding); GEMM2's bf16 output absorbs it. So:
//   GEMM1 FP8  exact accumulation: e4m3 tiles converted to f16 (exact: every e4m3 value is an
//              f16 value), f16 wgmma with fp32 accumulation. A from registers, converted there
//              (swap-AB: the weights; normal: the tokens); B converted in shared memory.
//              e4m3 accumulation (the moe_wgmma1_e4m3 variants): e4m3 wgmma promoted into fp32
//              registers once a stage, as GEMM2 (moe_consume_e4m3); against the layer's float64
//              truth it is as accurate as the exact path (docs/moe.md, "Accumulation").
//   GEMM2 FP8  e4m3 wgmma, promoted into fp32 registers once a stage (128 of K; its bf16 output
//              is not requantized, so the e4m3 accumulation over a stage costs little), or
//              (moe_wgmma2_e4m3w) accumulated over the whole K, unpromoted, as GEMM1's e4m3w.
//   bf16       bf16 wgmma, fp32 accumulation.
#pragma once

#include "moe/wgmma_consume_f16.cuh"

namespace specjit_kernels {

// Straight from the stage: bf16 (fp32 accumulation), or e4m3 whose stage sums (four k32 MMAs)
// are promoted into fp32 registers (PROMOTE). MMAs WIDTH wide (moe_with_width).
template <class G, WgmmaType TYPE, bool PROMOTE, int WIDTH>
__device__ __forceinline__ void moe_consume_direct(const MoeWgmmaBlock& b, int step0, int k0,
                                                   int k1, float (&acc)[G::k_halves][G::k_acc]) {
  constexpr int k_regs = WIDTH / 2; // accumulators the MMAs write
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  // Normal orientation without promotion keeps one group in flight and releases a stage one
  // iteration late; everything else waits and releases at once.
  constexpr bool k_in_flight = !PROMOTE && !G::k_swap;
  // PROMOTE: each stage's sums, k_regs a thread per half (no more, or ptxas serializes the
  // wgmmas of a narrow width for want of registers: C7511).
  float part[G::k_halves][PROMOTE ? k_regs : 1];
  if constexpr (PROMOTE || WIDTH < G::k_mma_n)
    moe_zero_acc<G>(acc);
  auto target = [&](int h) -> float* {
    if constexpr (PROMOTE)
      return part[h];
    else
      return acc[h];
  };
  auto fence_target = [&] {
    if constexpr (PROMOTE) {
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        fence_registers<k_regs>(part[h]);
    } else {
      moe_fence_acc<G, k_regs>(acc);
    }
  };
  const int first = k0 + moe_first_stage<G>();
  if (moe_rows_all_padding<G>(b)) {
    moe_pass_stages<G>(b, step0, first, k1);
    moe_zero_acc<G>(acc);
    return;
  }
#pragma unroll 1
  for (int kt = first; kt < k1; kt += G::k_split) {
    const unsigned w_tile = moe_wait_stage<G>(b, step0 + kt);
    if constexpr (!G::k_a_tma) // token rows gathered by cp.async (generic proxy), read by wgmma
      fence_proxy_async_shared();
    unsigned long long a_desc[G::k_halves], b_desc;
    moe_stage_descs<G>(w_tile, w_tile + G::k_w_tile_bytes, G::k_bw, wg, a_desc, b_desc);
    fence_target();
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        Wgmma<TYPE, WIDTH>::mma(target(h), a_desc[h] + 2 * ks, b_desc + 2 * ks,
                                PROMOTE ? ks != 0 : (kt != first) | (ks != 0));
    wgmma_commit();
    fence_target();
    if constexpr (PROMOTE) {
      wgmma_wait<0>();
      fence_target();
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
        for (int i = 0; i < k_regs; ++i)
          acc[h][i] += part[h][i];
    }
    if constexpr (k_in_flight) {
      wgmma_wait<1>();
      if (kt > first)
        moe_release_stage<G>(b, step0 + kt - 1);
    } else {
      wgmma_wait<0>();
      moe_release_stage<G>(b, step0 + kt);
    }
  }
  wgmma_wait<0>();
  if constexpr (k_in_flight) // the last stage, for the CTA's next tile
    moe_release_stage<G>(b, step0 + k1 - 1);
  moe_fence_acc<G>(acc);
}

// FP8 GEMM1 on the e4m3 tensor cores (G::k_e4m3_mma): the stage's e4m3 tokens and weights read
// straight from shared memory by e4m3 MMAs (no conversion, twice the f16 MMA rate), each stage's
// sums (four k32 MMAs) promoted into the fp32 accumulators. The promotion needs registers for
// the stage's partial sums, so the MMAs run in groups: swap-AB the gate half and the up half,
// the normal orientation 128-row pieces of the weight tile (B). Groups share one commit and
// wait while all their partial sums fit in 64 registers a thread, else they run one after the
// other (BW = 256 normal: 128 accumulators and 64 partial sums). Accuracy: docs/moe.md,
// "Accumulation".
template <class G, int WIDTH>
__device__ __forceinline__ void moe_consume_e4m3(const MoeWgmmaBlock& b, int step0, int k0, int k1,
                                                 float (&acc)[G::k_halves][G::k_acc]) {
  constexpr int k_chunk = G::k_swap || WIDTH <= 128 ? WIDTH : 128;
  constexpr int k_chunks = WIDTH / k_chunk;
  constexpr int k_groups = G::k_halves * k_chunks;
  constexpr int k_part = k_chunk / 2; // partial sums of one group, a thread
  constexpr int k_batch = k_groups * k_part <= 64 ? k_groups : 1;
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  moe_zero_acc<G>(acc);
  const int first = k0 + moe_first_stage<G>();
  if (moe_rows_all_padding<G>(b)) {
    moe_pass_stages<G>(b, step0, first, k1);
    return;
  }
#pragma unroll 1
  for (int kt = first; kt < k1; kt += G::k_split) {
    const unsigned w_tile = moe_wait_stage<G>(b, step0 + kt);
    if constexpr (!G::k_a_tma) // token rows gathered by cp.async (generic proxy), read by wgmma
      fence_proxy_async_shared();
    unsigned long long a_desc[G::k_halves], b_desc;
    moe_stage_descs<G>(w_tile, w_tile + G::k_w_tile_bytes, G::k_bw, wg, a_desc, b_desc);
#pragma unroll
    for (int g0 = 0; g0 < k_groups; g0 += k_batch) {
      float part[k_batch][k_part];
#pragma unroll
      for (int g = 0; g < k_batch; ++g)
        fence_registers<k_part>(part[g]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int g = 0; g < k_batch; ++g) {
          const int h = (g0 + g) / k_chunks, c = (g0 + g) % k_chunks;
          // Piece c of B starts 128c rows on (a descriptor counts 16-byte units).
          Wgmma<WgmmaType::e4m3, k_chunk>::mma(part[g], a_desc[h] + 2 * ks,
                                               b_desc + c * k_chunk * 8 + 2 * ks, ks != 0);
        }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int g = 0; g < k_batch; ++g) {
        fence_registers<k_part>(part[g]);
        const int h = (g0 + g) / k_chunks, c = (g0 + g) % k_chunks;
#pragma unroll
        for (int i = 0; i < k_part; ++i)
          acc[h][c * k_part + i] += part[g][i];
      }
    }
    moe_release_stage<G>(b, step0 + kt);
  }
  moe_fence_acc<G>(acc);
}

// The K stages k0 .. k1 - 1 of the CTA's current tile into acc; stage k lives in pipeline step
// step0 + k. Fixed schedule: all of K (0 .. k_k_tiles); stream-K: the CTA's part of it.
template <class G>
__device__ __forceinline__ void moe_wgmma_consume(const MoeWgmmaBlock& b, int step0, int k0, int k1,
                                                  float (&acc)[G::k_halves][G::k_acc]) {
  moe_with_width<G>(b.used_rows, [&](auto width) {
    [[maybe_unused]] constexpr int k_width = decltype(width)::value; // the f16 normal: all rows
    if constexpr (!G::k_fp8)
      moe_consume_direct<G, WgmmaType::bf16, false, k_width>(b, step0, k0, k1, acc);
    else if constexpr (!G::k_gated)
      moe_consume_direct<G, WgmmaType::e4m3, !G::k_e4m3_whole_k, k_width>(b, step0, k0, k1, acc);
    else if constexpr (G::k_e4m3_whole_k)
      moe_consume_direct<G, WgmmaType::e4m3, false, k_width>(b, step0, k0, k1, acc);
    else if constexpr (G::k_e4m3_mma)
      moe_consume_e4m3<G, k_width>(b, step0, k0, k1, acc);
    else if constexpr (G::k_t16)
      moe_consume_f16_tokens<G, k_width>(b, step0, k0, k1, acc);
    else if constexpr (G::k_swap)
      moe_consume_f16_regs<G, k_width>(b, step0, k0, k1, acc);
    else
      moe_consume_f16_normal<G>(b, step0, acc); // normal orientation: fixed schedule, all of K
  });
}

} // namespace specjit_kernels
