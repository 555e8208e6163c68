// FP8 GEMM1's exact accumulation (moe/wgmma_consume.cuh, "Precision"): its e4m3 tiles converted
// to f16 in registers or shared memory, and the K loops of f16 wgmma on them.
#pragma once

#include "moe/wgmma_stages.cuh"

namespace specjit_kernels {

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

} // namespace specjit_kernels
