// The consumer warpgroups of the wgmma MoE GEMMs (moe/gemm_wgmma.cu): one K loop per operand
// precision, and the swap-AB reduction across warpgroups that split K.
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
//              is not requantized, so the e4m3 accumulation over a stage costs little).
//   bf16       bf16 wgmma, fp32 accumulation.
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

// A 16-byte chunk (column c of row r) of e4m3 -> its 16 f16 values, stored at `row_base` (the
// row in a [rows][128 B] swizzled tile of one K half) in the permuted k order of the register-A
// fragments (moe_load_a_f16): f16 k16 step j takes e4m3 bytes 16j..16j+15 in the order
// [0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15].
__device__ __forceinline__ void moe_convert_chunk(unsigned row_base, int r, int c, U32x4 v) {
  U32x4 f0, f1;
  e4m3x16_to_f16_fragment_order(v, f0, f1);
  const int q = (2 * c) & 7;
  store_shared_u32x4(row_base + ((q ^ (r & 7)) << 4), f0.x, f0.y, f0.z, f0.w);
  store_shared_u32x4(row_base + (((q + 1) ^ (r & 7)) << 4), f1.x, f1.y, f1.z, f1.w);
}

// e4m3 rows [rows][128 B] of `tile` -> f16 [2 halves of K][rows][128 B] at `out` (permuted k
// order): the first `count` rows, items `first`, `first + step`, ... of their count * 8 chunks.
__device__ __forceinline__ void moe_convert_tile(unsigned tile, unsigned out, int rows, int count,
                                                 int first, int step) {
  for (int item = first; item < count * 8; item += step) {
    const int r = item >> 3, c = item & 7;
    const U32x4 v = load_shared_u32x4(tile + r * 128 + ((c ^ (r & 7)) << 4));
    moe_convert_chunk(out + (c >> 2) * rows * 128 + r * 128, r, c, v);
  }
}

// wgmma's A from registers, for FP8 GEMM1, in two steps so that the shared-memory load's
// latency can be covered by other work. Load: k32 step `kk` (bytes 32kk..32kk+31) of the warp's
// 16 e4m3 rows of `tile` ([rows][128 B], swizzled; this lane's row is `row`, lanes 0-15 and
// 16-31 address the step's two 16-byte chunks) with ldmatrix, which gives the mma.sync e4m3
// fragment (row lane/4 (+8), bytes 4(lane%4)..+3 of each chunk). Convert: the two f16 k16
// fragments of the step, which want k 2q, 2q+1, 2q+8, 2q+9 (q = lane%4): hence the permuted
// k order (moe_convert_chunk), which the other operand follows.
__device__ __forceinline__ void moe_load_a_e4m3(unsigned tile, int row, int kk, unsigned (&e)[4]) {
  const int chunk = 2 * kk + (static_cast<int>(threadIdx.x & 31) >> 4);
  ldmatrix_x4(tile + row * 128 + ((chunk ^ (row & 7)) << 4), e[0], e[1], e[2], e[3]);
}
__device__ __forceinline__ void moe_a_to_f16(const unsigned (&e)[4], unsigned (&lo)[4],
                                             unsigned (&hi)[4]) {
  e4m3x4_to_f16x4(e[0], lo[0], lo[2]);
  e4m3x4_to_f16x4(e[1], lo[1], lo[3]);
  e4m3x4_to_f16x4(e[2], hi[0], hi[2]);
  e4m3x4_to_f16x4(e[3], hi[1], hi[3]);
}
__device__ __forceinline__ void moe_load_a_f16(unsigned tile, int row, int kk, unsigned (&lo)[4],
                                               unsigned (&hi)[4]) {
  unsigned e[4];
  moe_load_a_e4m3(tile, row, kk, e);
  moe_a_to_f16(e, lo, hi);
}

// FP8 GEMM1, swap-AB: the weights are wgmma's A, taken from registers (moe_load_a_f16, each
// warp its 16 rows of each half); the token tile (B) is converted in shared memory into the
// same permuted k order, double-buffered per warpgroup. The stage is released as soon as its
// ldmatrix loads have returned. MMAs WIDTH wide: only the first WIDTH token rows are converted.
template <class G, int WIDTH>
__device__ __forceinline__ void moe_consume_f16_regs(const MoeWgmmaBlock& b, int step0, int k0,
                                                     int k1, float (&acc)[G::k_halves][G::k_acc]) {
  static_assert(G::k_swap, "register A is the weights: swap-AB only");
  if constexpr (WIDTH < G::k_mma_n)
    moe_zero_acc<G>(acc);
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  constexpr int k_t16_bytes = 2 * G::k_tok * 128;
  const unsigned t16_base = b.tiles + G::k_stages_value * G::k_stage_bytes + wg * 2 * k_t16_bytes;
  const int first = k0 + moe_first_stage<G>();
#pragma unroll 1
  for (int kt = first; kt < k1; kt += G::k_split) {
    const unsigned w_tile = moe_wait_stage<G>(b, step0 + kt);
    const unsigned t16 = t16_base + (((step0 + kt) / G::k_split) & 1) * k_t16_bytes;
    moe_convert_tile(w_tile + G::k_w_tile_bytes, t16, G::k_tok, WIDTH, tid & 127, 128);
    unsigned a[G::k_halves][8][4];
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        moe_load_a_f16(w_tile, h * (G::k_bw / 2) + warp * 16 + (lane & 15), kk, a[h][2 * kk],
                       a[h][2 * kk + 1]);
    fence_proxy_async_shared();
    // The warpgroup's f16 tokens are complete, its wgmmas of two stages ago have completed
    // (each thread waited before arriving), and this stage's e4m3 bytes have all been read.
    named_barrier(1 + wg, 128);
    moe_release_stage<G>(b, step0 + kt);
    moe_fence_acc<G, WIDTH / 2>(acc);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const unsigned long long b_desc =
          wgmma_desc_sw128(t16 + (j >> 2) * G::k_tok * 128) + 2 * (j & 3);
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        WgmmaRegA<WIDTH>::mma(acc[h], a[h][j], b_desc, (kt != first) | (j != 0));
    }
    wgmma_commit();
    moe_fence_acc<G, WIDTH / 2>(acc);
    wgmma_wait<0>(); // the A registers are rewritten by the next stage
  }
}

// FP8 GEMM1, swap-AB with f16 tokens (k_t16): warpgroup w takes the weight rows of output
// columns 64w.. (its gate rows and its up rows) as wgmma's A from registers (moe_load_a_f16),
// and the stage's f16 token rows, already in the fragments' k order, as B. Each stage runs as
// two K halves: the MMAs of one half are in flight while the A fragments of the next half are
// loaded and converted (into the other register set; a half's registers are written only
// while the MMAs reading the other set run, as in moe_consume_f16_normal). The stage is
// released once the MMAs of both its halves have completed (they read its tokens).
template <class G, int WIDTH>
__device__ __forceinline__ void moe_consume_f16_tokens(const MoeWgmmaBlock& b, int step0, int k0,
                                                       int k1,
                                                       float (&acc)[G::k_halves][G::k_acc]) {
  static_assert(G::k_t16 && G::k_halves == 2, "f16 tokens: gate and up MMAs");
  if constexpr (WIDTH < G::k_mma_n)
    moe_zero_acc<G>(acc);
  const int tid = static_cast<int>(threadIdx.x);
  const int a_row = (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + (tid & 15);
  // a[h][s]: gate (h = 0) and up (h = 1) fragments of the half's four f16 k16 steps.
  unsigned a0[2][4][4], a1[2][4][4];
  auto load = [&](unsigned stage, int half, unsigned(&a)[2][4][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
        moe_load_a_f16(stage, h * (G::k_bw / 2) + a_row, 2 * half + kk, a[h][2 * kk],
                       a[h][2 * kk + 1]);
  };
  auto issue = [&](unsigned stage, int half, const unsigned(&a)[2][4][4], bool first) {
    const unsigned long long b_desc =
        wgmma_desc_sw128(stage + G::k_w_tile_bytes + half * G::k_tok * 128);
    moe_fence_acc<G, WIDTH / 2>(acc);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        WgmmaRegA<WIDTH>::mma(acc[h], a[h][s], b_desc + 2 * s, !first || s != 0);
    wgmma_commit();
    moe_fence_acc<G, WIDTH / 2>(acc);
  };
  unsigned stage = moe_wait_stage<G>(b, step0 + k0);
  fence_proxy_async_shared(); // token rows gathered by cp.async (generic proxy), read by wgmma
  load(stage, 0, a0);
#pragma unroll 1
  for (int kt = k0; kt < k1; ++kt) {
    issue(stage, 0, a0, kt == k0);
    load(stage, 1, a1);
    wgmma_wait<0>();
    issue(stage, 1, a1, false);
    if (kt + 1 < k1) {
      stage = moe_wait_stage<G>(b, step0 + kt + 1);
      fence_proxy_async_shared();
      load(stage, 0, a0);
    }
    wgmma_wait<0>();
    moe_release_stage<G>(b, step0 + kt); // both halves' MMAs have read its tokens
  }
}

// One K half (64 values: chunks 4 * half .. 4 * half + 3) of e4m3 rows [ROWS][128 B] of `tile`
// -> f16 [ROWS][128 B] (permuted k order) at `out`, by STEP threads (this one is `first`): all
// of the thread's loads first, then the conversions and stores, so that the loads' latencies
// overlap.
template <int ROWS, int STEP>
__device__ __forceinline__ void moe_convert_half(unsigned tile, unsigned out, int half, int first) {
  static_assert(ROWS * 4 % STEP == 0, "the same number of chunks for every thread");
  constexpr int k_items = ROWS * 4 / STEP;
  U32x4 v[k_items];
#pragma unroll
  for (int i = 0; i < k_items; ++i) {
    const int item = first + i * STEP, r = item >> 2, c = 4 * half + (item & 3);
    v[i] = load_shared_u32x4(tile + r * 128 + ((c ^ (r & 7)) << 4));
  }
#pragma unroll
  for (int i = 0; i < k_items; ++i) {
    const int item = first + i * STEP, r = item >> 2, c = 4 * half + (item & 3);
    moe_convert_chunk(out + r * 128, r, c, v[i]);
  }
}

// FP8 GEMM1, normal orientation: the tokens are wgmma's A, taken from registers
// (moe_load_a_e4m3, moe_a_to_f16: each warp its 16 of the warpgroup's 64 token rows), so only
// the weights (B) are converted in shared memory, one K half at a time, into two buffers (one
// per half), while the wgmmas of the other half run: each half-step issues the MMAs of one
// half, loads and converts the next half, waits for its MMAs and meets the other consumers at
// one barrier (the next half is complete, this half's buffer and registers are free). A half's A
// registers are written only while the MMAs of the other half, which read other registers, are in
// flight.
template <class G>
__device__ __forceinline__ void moe_consume_f16_normal(const MoeWgmmaBlock& b, int step0,
                                                       float (&acc)[G::k_halves][G::k_acc]) {
  static_assert(!G::k_swap, "swap-AB: moe_consume_f16_regs");
  const int tid = static_cast<int>(threadIdx.x);
  const int a_row = (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + (tid & 15);
  const unsigned w16 = b.tiles + G::k_stages_value * G::k_stage_bytes;
  const bool idle = moe_rows_all_padding<G>(b);
  unsigned a0[4][4], a1[4][4]; // the f16 A fragments of K half 0 and 1 (four k16 steps each)
  // The token rows' ldmatrix loads are issued first and converted last: the weights' conversion
  // covers their latency.
  auto convert = [&](int kt, int half, unsigned(&a)[4][4]) {
    const unsigned stage = moe_stage<G>(b, step0 + kt);
    unsigned e[2][4];
    if (!idle)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
        moe_load_a_e4m3(stage + G::k_w_tile_bytes, a_row, 2 * half + kk, e[kk]);
    moe_convert_half<G::k_bw, G::k_consumers>(stage, w16 + half * G::k_bw * 128, half, tid);
    if (!idle)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
        moe_a_to_f16(e[kk], a[2 * kk], a[2 * kk + 1]);
    fence_proxy_async_shared();
  };
  auto issue = [&](int kt, int half, const unsigned(&a)[4][4]) {
    if (idle)
      return;
    const unsigned long long b_desc = wgmma_desc_sw128(w16 + half * G::k_bw * 128);
    moe_fence_acc<G>(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      WgmmaRegA<G::k_mma_n>::mma(acc[0], a[ks], b_desc + 2 * ks, (kt | half | ks) != 0);
    wgmma_commit();
    moe_fence_acc<G>(acc);
  };
  moe_wait_stage<G>(b, step0);
  convert(0, 0, a0);
  named_barrier(1, G::k_consumers);
#pragma unroll 1
  for (int kt = 0; kt < G::k_k_tiles; ++kt) {
    issue(kt, 0, a0);
    convert(kt, 1, a1);
    wgmma_wait<0>();
    named_barrier(1, G::k_consumers);
    moe_release_stage<G>(b, step0 + kt); // both halves loaded and converted
    issue(kt, 1, a1);
    if (kt + 1 < G::k_k_tiles) {
      moe_wait_stage<G>(b, step0 + kt + 1);
      convert(kt + 1, 0, a0);
    }
    wgmma_wait<0>();
    named_barrier(1, G::k_consumers);
  }
  if (idle)
    moe_zero_acc<G>(acc);
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
    fence_proxy_async_shared(); // token rows gathered by cp.async (generic proxy), read by wgmma
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
    constexpr int k_width = decltype(width)::value;
    if constexpr (!G::k_fp8)
      moe_consume_direct<G, WgmmaType::bf16, false, k_width>(b, step0, k0, k1, acc);
    else if constexpr (!G::k_gated)
      moe_consume_direct<G, WgmmaType::e4m3, true, k_width>(b, step0, k0, k1, acc);
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

// Swap-AB with K split across warpgroups: warpgroup 1 hands its partial sums to warpgroup 0
// through the (now idle) stage memory. Returns false for the warpgroups that are done.
template <class G>
__device__ __forceinline__ bool moe_wgmma_reduce(const MoeWgmmaBlock& b,
                                                 float (&acc)[G::k_halves][G::k_acc]) {
  if constexpr (G::k_split == 1) {
    return true;
  } else {
    static_assert(G::k_split == 2, "two warpgroups at most");
    static_assert(G::k_halves * G::k_acc * 128 * 4 <= G::k_stages_value * G::k_stage_bytes,
                  "the partial sums fit in the stage memory");
    const int tid = static_cast<int>(threadIdx.x);
    // Every stage has been consumed, so the producer writes no more shared memory.
    named_barrier(1 + G::k_split, G::k_consumers);
    float* partial = reinterpret_cast<float*>(b.tiles_generic);
    if (tid >= 128) {
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
        for (int i = 0; i < G::k_acc; ++i)
          partial[(h * G::k_acc + i) * 128 + (tid - 128)] = acc[h][i];
    }
    named_barrier(1 + G::k_split, G::k_consumers);
    if (tid >= 128)
      return false;
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
      for (int i = 0; i < G::k_acc; ++i)
        acc[h][i] += partial[(h * G::k_acc + i) * 128 + tid];
    return true;
  }
}

// Split-K across the CTAs of a cluster: once every CTA is past its K loop (the first CTA's
// stage memory is then idle), the others store their partial sums into the first CTA's stage
// memory through distributed shared memory and finish; the first adds them in rank order (the
// result does not depend on timing) and goes on to the epilogue. Called by the 128 threads that
// hold the sums (after moe_wgmma_reduce); returns false for the CTAs that handed theirs over.
template <class G>
__device__ __forceinline__ bool moe_wgmma_split_reduce(const MoeWgmmaBlock& b,
                                                       float (&acc)[G::k_halves][G::k_acc]) {
  if constexpr (G::k_split_k == 1) {
    return true;
  } else {
    constexpr int k_values = G::k_halves * G::k_acc; // per thread
    static_assert((G::k_split_k - 1) * k_values * 128 * 4 <= G::k_stages_value * G::k_stage_bytes,
                  "the other CTAs' partial sums fit in the stage memory");
    const int tid = static_cast<int>(threadIdx.x);
    const unsigned rank = cluster_ctarank();
    cluster_arrive();
    cluster_wait();
    if (rank != 0) {
      const unsigned base =
          cluster_map_shared(b.tiles, 0) + ((rank - 1) * k_values * 128 + tid) * 4;
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
        for (int i = 0; i < G::k_acc; ++i)
          store_cluster_f32(base + (h * G::k_acc + i) * 128 * 4, acc[h][i]);
      cluster_arrive(); // releases the stores; this CTA is done
      return false;
    }
    cluster_arrive();
    cluster_wait();
    const float* partial = reinterpret_cast<const float*>(b.tiles_generic);
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
      for (int i = 0; i < G::k_acc; ++i)
#pragma unroll
        for (int r = 1; r < G::k_split_k; ++r)
          acc[h][i] += partial[((r - 1) * k_values + h * G::k_acc + i) * 128 + tid];
    named_barrier(4, 128); // the stage memory is reused by moe_wgmma_pair_up
    return true;
  }
}

// Stream-K: a tile whose K stages are split between CTAs. Each CTA holding a piece stores its
// sums in its slot of the workspace (slot 1 for the tile's first stages, the head piece, which is
// its CTA's last work; slot 0 for the others, each the first work of its CTA) and counts itself
// in at the head CTA's counter; the piece that arrives last adds all the pieces in order of K,
// so the result does not depend on timing, resets the counter, and returns true: its CTA writes
// the outputs. No CTA waits for another, so any number of them may be resident at once. Called
// by the consumer warpgroup (named barrier 5); `tile_begin` is the tile's first step.
__device__ __forceinline__ unsigned moe_counter_add(int* counter) {
  unsigned old;
  asm volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}
__device__ __forceinline__ float moe_load_l2(const float* address) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(address) : "memory");
  return v;
}

template <class G>
__device__ __forceinline__ bool moe_stream_k_meet(unsigned char* scratch, const MoeStreamK& sk,
                                                  int cta, long long tile_begin,
                                                  float (&acc)[G::k_halves][G::k_acc]) {
  constexpr int k_slot = G::k_halves * G::k_acc * 128; // floats
  __shared__ int is_last;
  const int tid = static_cast<int>(threadIdx.x);
  int* counters = reinterpret_cast<int*>(scratch);
  float* slots = reinterpret_cast<float*>(counters + k_scratch_ints);
  const int head = sk.cta_of(tile_begin);
  const long long tile_end = tile_begin + G::k_k_tiles;
  auto slot_of = [&](int c) {
    return slots + static_cast<long long>(2 * c + (c == head)) * k_slot;
  };
  float* mine = slot_of(cta);
#pragma unroll
  for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
    for (int i = 0; i < G::k_acc; ++i)
      mine[(h * G::k_acc + i) * 128 + tid] = acc[h][i];
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  named_barrier(5, 128);
  if (tid == 0) {
    int pieces = 0;
    for (int c = head; c < sk.ctas && sk.begin(c) < tile_end; ++c)
      pieces += sk.begin(c) < sk.begin(c + 1);
    is_last = moe_counter_add(counters + head) == static_cast<unsigned>(pieces - 1);
    if (is_last)
      counters[head] = 0; // every piece has arrived: ready for the next launch
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  named_barrier(5, 128);
  if (!is_last)
    return false;
  // Every piece from its slot, this CTA's own too: acc is overwritten with the first piece's
  // sums before this CTA's piece (not always the first) is added.
  bool first = true;
#pragma unroll 1
  for (int c = head; c < sk.ctas && sk.begin(c) < tile_end; ++c) {
    if (sk.begin(c) == sk.begin(c + 1))
      continue; // no steps
    const float* piece = slot_of(c);
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
      for (int i = 0; i < G::k_acc; ++i) {
        const float v = moe_load_l2(piece + (h * G::k_acc + i) * 128 + tid);
        acc[h][i] = first ? v : acc[h][i] + v;
      }
    first = false;
  }
  return true; // (every thread has read is_last before thread 0 passes the next call's barrier)
}

} // namespace specjit_kernels
