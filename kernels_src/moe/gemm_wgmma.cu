// The two grouped GEMMs of the MoE layer on Hopper warp-group MMA (wgmma, sm_90a only), for
// e4m3 (W8A8 per tensor) and bf16; same contract and epilogues as moe/gemm.cu:
//   GEMM1  A = hidden [T, K] gathered by slot / top_k, weights w13[e] [2N, K] (gate rows, then
//          up rows); epilogue silu(gate) * up, per slot into the intermediate [T*k, N] as e4m3
//          (divided by the static scale a2) or bf16.
//   GEMM2  A = intermediate [T*k, K] gathered by slot, weights w2[e] [N, K]; epilogue times the
//          router weight in fp32, per slot into slot_out [T*k, N] bf16.
// Grid: 1-D, ceil(blocks / 8) * 8 * (N / OUT_COLS) CTAs, each one (block of TOK sorted slots,
// weight tile of OUT_COLS output columns) in grouped order (moe_wgmma_setup); launched for the
// worst-case block count, blocks at or past num_tokens_post_padded exit at once. GEMM2 is
// meant to be launched programmatically after GEMM1 (see moe_wgmma_produce).
//
// Two orientations, picked per token-count bucket by the configuration table:
//   normal   each consumer warpgroup owns 64 token rows (wgmma's M); the weight tile's BW rows
//            are wgmma's N. TOK = 64 * WGS. For many tokens per expert.
//   swap-AB  each consumer warpgroup owns 64 output columns: its 64 weight rows are wgmma's M
//            (gated: two MMAs, its gate rows and its up rows, into two accumulators) and the
//            TOK tokens are N (8..256). For few tokens per expert: no wasted M rows.
// Either way the accumulator of a thread covers rows 16w + lane/4 (+8) and columns
// 8j + 2(lane%4) (+1) of its warpgroup's 64 x MMA_N tile.
//
// Pipeline (STAGES deep, 128 bytes of K per stage): one producer warp loads the weight tile
// with TMA (128-byte swizzle, completing the stage's `full` mbarrier by transaction count) and
// gathers the token rows by index with cp.async into the same swizzled layout; it signals those
// LAG = STAGES - 2 stages later (wait_group, proxy fence, arrive), which keeps it streaming
// while the consumers hold one wgmma group in flight. Consumers release a stage on `empty` once
// the wgmma that read it has completed. FP8 scales are applied once after the K loop.
#include "common/fp8.cuh"
#include "common/spec.cuh"
#include "common/wgmma.cuh"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

template <bool FP8, bool GATED, int N, int K, bool SWAP, int TOK, int BW, int WGS, int STAGES>
struct MoeWgmma {
  static constexpr int k_k_bytes = K * (FP8 ? 1 : 2);
  static constexpr int k_k_tiles = k_k_bytes / 128;
  static constexpr int k_consumers = 128 * WGS;
  static constexpr int k_threads = k_consumers + 32;
  static constexpr int k_w_tile_bytes = BW * 128;
  static constexpr int k_stage_bytes = (BW + TOK) * 128;
  static constexpr int k_out_cols = GATED ? BW / 2 : BW;
  static constexpr int k_mma_n = SWAP ? TOK : BW;
  static constexpr int k_halves = SWAP && GATED ? 2 : 1;
  static constexpr int k_acc = k_mma_n / 2;
  static constexpr int k_lag = STAGES - 2;

  static_assert(k_k_bytes % 128 == 0, "K must fill 128-byte rows");
  static_assert(STAGES >= 3 && STAGES <= 8, "3 to 8 stages");
  static_assert(N % k_out_cols == 0, "N must be a multiple of the tile's output columns");
  static_assert(!SWAP || k_out_cols == 64 * WGS, "swap-AB: 64 output columns per warpgroup");
  static_assert(SWAP || TOK == 64 * WGS, "normal: 64 token rows per warpgroup");
  static_assert(k_mma_n == 8 || k_mma_n == 16 || k_mma_n == 32 || k_mma_n == 64 ||
                    k_mma_n == 128 || k_mma_n == 256,
                "wgmma N must be one of 8, 16, 32, 64, 128, 256");
  static_assert(TOK % 8 == 0 && BW % 16 == 0, "tiles are whole 8-row swizzle atoms");
};

// Everything one CTA needs, set up before the main loop.
struct MoeWgmmaBlock {
  int m_block;         // block of TOK sorted slots
  int tile;            // weight tile (k_out_cols output columns)
  int expert;
  unsigned tiles;      // shared address of stage 0 (1024-byte aligned)
  unsigned full_bar;   // shared address of full[0] (8 bytes per stage)
  unsigned empty_bar;  // shared address of empty[0]
};

// The producer warp. `depends` (GEMM2): the token rows are the previous kernel's output, so the
// first stages' weights are requested before griddepcontrol.wait and the gathers after it;
// under a programmatic launch the weight stream overlaps the end of GEMM1.
template <class G>
__device__ __forceinline__ void moe_wgmma_produce(const MoeWgmmaBlock& b, const TmaDesc* w_map,
                                                  const unsigned char* a, const int* a_rows,
                                                  int w_row0, int w_row_half, bool depends) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  auto load_weights = [&](int kt) {
    const int s = kt % G::k_stages_value;
    const unsigned full = b.full_bar + 8 * s;
    mbarrier_wait(b.empty_bar + 8 * s, ((kt / G::k_stages_value) & 1) ^ 1);
    if (lane == 0) {
      const unsigned w_tile = b.tiles + s * G::k_stage_bytes;
      mbarrier_arrive_expect_tx(full, G::k_w_tile_bytes);
      tma_load_3d(w_tile, w_map, full, kt * 128, w_row0, b.expert);
      if constexpr (G::k_gated)
        tma_load_3d(w_tile + G::k_w_tile_bytes / 2, w_map, full, kt * 128, w_row0 + w_row_half,
                    b.expert);
    }
  };
  const int prefetched = depends ? (G::k_k_tiles < G::k_stages_value ? G::k_k_tiles
                                                                      : G::k_stages_value)
                                 : 0;
#pragma unroll 1
  for (int kt = 0; kt < prefetched; ++kt)
    load_weights(kt);
  if (depends)
    grid_dependency_wait();
#pragma unroll 1
  for (int kt = 0; kt < G::k_k_tiles; ++kt) {
    if (kt >= prefetched)
      load_weights(kt);
    const unsigned t_tile =
        b.tiles + (kt % G::k_stages_value) * G::k_stage_bytes + G::k_w_tile_bytes;
#pragma unroll
    for (int c = lane; c < G::k_tok * 8; c += 32) {
      const int r = c >> 3, chunk = c & 7;
      const int row = a_rows[r];
      const unsigned char* src = a + static_cast<long long>(row < 0 ? 0 : row) * G::k_k_bytes +
                                 kt * 128 + chunk * 16;
      cp_async_16(t_tile + r * 128 + ((chunk ^ (r & 7)) << 4), src, row < 0 ? 0 : 16);
    }
    cp_async_commit();
    if (kt >= G::k_lag) {
      cp_async_wait<G::k_lag>();
      fence_proxy_async_shared();
      mbarrier_arrive(b.full_bar + 8 * ((kt - G::k_lag) % G::k_stages_value));
    }
  }
  cp_async_wait<0>();
  fence_proxy_async_shared();
  const int first = G::k_k_tiles > G::k_lag ? G::k_k_tiles - G::k_lag : 0;
#pragma unroll 1
  for (int kt = first; kt < G::k_k_tiles; ++kt)
    mbarrier_arrive(b.full_bar + 8 * (kt % G::k_stages_value));
}

// The consumer warpgroups' K loop, bf16: wgmma straight from the stage, accumulating in fp32
// over the whole K with one wgmma group in flight.
template <class G>
__device__ __forceinline__ void moe_wgmma_consume_bf16(const MoeWgmmaBlock& b,
                                                       float (&acc)[G::k_halves][G::k_acc]) {
  const int wg = static_cast<int>(threadIdx.x) >> 7;
#pragma unroll 1
  for (int kt = 0; kt < G::k_k_tiles; ++kt) {
    const int s = kt % G::k_stages_value;
    mbarrier_wait(b.full_bar + 8 * s, (kt / G::k_stages_value) & 1);
    const unsigned w_tile = b.tiles + s * G::k_stage_bytes;
    const unsigned t_tile = w_tile + G::k_w_tile_bytes;
    unsigned long long a_desc[G::k_halves], b_desc;
    if constexpr (G::k_swap) {
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        a_desc[h] = wgmma_desc_sw128(w_tile + (h * (G::k_bw / 2) + wg * 64) * 128);
      b_desc = wgmma_desc_sw128(t_tile);
    } else {
      a_desc[0] = wgmma_desc_sw128(t_tile + wg * 64 * 128);
      b_desc = wgmma_desc_sw128(w_tile);
    }
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        Wgmma<WgmmaType::bf16, G::k_mma_n>::mma(acc[h], a_desc[h] + 2 * ks, b_desc + 2 * ks,
                                                (kt | ks) != 0);
    wgmma_commit();
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_wait<1>();
    if (kt > 0)
      mbarrier_arrive(b.empty_bar + 8 * ((kt - 1) % G::k_stages_value));
  }
  wgmma_wait<0>();
#pragma unroll
  for (int h = 0; h < G::k_halves; ++h)
    fence_registers(acc[h]);
}

// The consumer warpgroups' K loop, FP8 in the normal orientation. e4m3 wgmma accumulates with less than fp32 precision:
// measured on the H200 against the emulating reference, the layer's error was 1.1-2.0e-2 with
// e4m3 wgmma over the whole K, 5.3e-3 promoting into fp32 registers every 128 of K and
// 2.2-3.5e-3 promoting after every k32 instruction, against 3e-3 allowed and 0 for mma.sync.
// So each stage's e4m3 tiles are converted to f16 (exact: every e4m3 value is an f16 value)
// in shared memory, and f16 wgmma accumulates in fp32. The conversion reads the stage once,
// which frees it for the producer before the MMAs run.
//   f16 tiles: [2 halves of K][rows][128 bytes] for the weights, then the same for the tokens,
//   each half a 128-byte-swizzled K-major tile of 64 f16 per row.
template <class G>
__device__ __forceinline__ void moe_wgmma_consume_fp8(const MoeWgmmaBlock& b,
                                                      float (&acc)[G::k_halves][G::k_acc]) {
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const unsigned w16 = b.tiles + G::k_stages_value * G::k_stage_bytes;
  const unsigned t16 = w16 + 2 * G::k_bw * 128;
#pragma unroll 1
  for (int kt = 0; kt < G::k_k_tiles; ++kt) {
    const int s = kt % G::k_stages_value;
    mbarrier_wait(b.full_bar + 8 * s, (kt / G::k_stages_value) & 1);
    if (kt > 0)
      named_barrier(1, G::k_consumers); // every wgmma of the previous stage has completed
    const unsigned w_tile = b.tiles + s * G::k_stage_bytes;
    const unsigned t_tile = w_tile + G::k_w_tile_bytes;
#pragma unroll 2
    for (int item = tid; item < (G::k_bw + G::k_tok) * 8; item += G::k_consumers) {
      const int row = item >> 3, c = item & 7;
      const bool weight = row < G::k_bw;
      const int r = weight ? row : row - G::k_bw;
      const int rows = weight ? G::k_bw : G::k_tok;
      const U32x4 v = load_shared_u32x4((weight ? w_tile : t_tile) + r * 128 + ((c ^ (r & 7)) << 4));
      unsigned f[8];
      e4m3x4_to_f16x4(v.x, f[0], f[1]);
      e4m3x4_to_f16x4(v.y, f[2], f[3]);
      e4m3x4_to_f16x4(v.z, f[4], f[5]);
      e4m3x4_to_f16x4(v.w, f[6], f[7]);
      const unsigned row_base = (weight ? w16 : t16) + (c >> 2) * rows * 128 + r * 128;
      const int q = (2 * c) & 7;
      store_shared_u32x4(row_base + ((q ^ (r & 7)) << 4), f[0], f[1], f[2], f[3]);
      store_shared_u32x4(row_base + (((q + 1) ^ (r & 7)) << 4), f[4], f[5], f[6], f[7]);
    }
    fence_proxy_async_shared();
    named_barrier(1, G::k_consumers);
    mbarrier_arrive(b.empty_bar + 8 * s); // the e4m3 stage has been read
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const int half = ks >> 2;
      const unsigned w_half = w16 + half * G::k_bw * 128, t_half = t16 + half * G::k_tok * 128;
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h) {
        unsigned long long a_desc, b_desc;
        if constexpr (G::k_swap) {
          a_desc = wgmma_desc_sw128(w_half + (h * (G::k_bw / 2) + wg * 64) * 128);
          b_desc = wgmma_desc_sw128(t_half);
        } else {
          a_desc = wgmma_desc_sw128(t_half + wg * 64 * 128);
          b_desc = wgmma_desc_sw128(w_half);
        }
        Wgmma<WgmmaType::f16, G::k_mma_n>::mma(acc[h], a_desc + 2 * (ks & 3),
                                               b_desc + 2 * (ks & 3), (kt | ks) != 0);
      }
    }
    wgmma_commit();
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_wait<0>();
  }
#pragma unroll
  for (int h = 0; h < G::k_halves; ++h)
    fence_registers(acc[h]);
}

// FP8 swap-AB: the weights are wgmma's A, which may come from registers. Each warp loads its
// 16 weight rows of a k32 step with ldmatrix (the mma.sync e4m3 fragment: row lane/4 (+8),
// bytes 4(lane%4)..+3 and 16 + 4(lane%4)..+3) and converts them to two f16 A fragments; the
// f16 fragment wants k 2q, 2q+1, 2q+8, 2q+9 (q = lane%4), so f16 k16 step j takes e4m3 bytes
// 16j..16j+15 in the order perm = [0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15], and the token
// tile (B, converted to f16 in shared memory by the consumers, double-buffered) is written in
// that same order. No weight byte goes back to shared memory: the stage is released as soon
// as its ldmatrix loads have returned.
template <class G>
__device__ __forceinline__ void moe_wgmma_consume_fp8_swap(const MoeWgmmaBlock& b,
                                                           float (&acc)[G::k_halves][G::k_acc]) {
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  const unsigned t16_base = b.tiles + G::k_stages_value * G::k_stage_bytes;
  constexpr int k_t16_bytes = 2 * G::k_tok * 128; // one buffer: 2 halves of K
#pragma unroll 1
  for (int kt = 0; kt < G::k_k_tiles; ++kt) {
    const int s = kt % G::k_stages_value;
    mbarrier_wait(b.full_bar + 8 * s, (kt / G::k_stages_value) & 1);
    const unsigned w_tile = b.tiles + s * G::k_stage_bytes;
    const unsigned t_tile = w_tile + G::k_w_tile_bytes;
    const unsigned t16 = t16_base + (kt & 1) * k_t16_bytes;
    // Tokens -> f16 in the permuted k order.
    for (int item = tid; item < G::k_tok * 8; item += G::k_consumers) {
      const int r = item >> 3, c = item & 7;
      const U32x4 v = load_shared_u32x4(t_tile + r * 128 + ((c ^ (r & 7)) << 4));
      unsigned l[4], h[4];
      e4m3x4_to_f16x4(v.x, l[0], h[0]);
      e4m3x4_to_f16x4(v.y, l[1], h[1]);
      e4m3x4_to_f16x4(v.z, l[2], h[2]);
      e4m3x4_to_f16x4(v.w, l[3], h[3]);
      const unsigned row_base = t16 + (c >> 2) * G::k_tok * 128 + r * 128;
      const int q = (2 * c) & 7;
      store_shared_u32x4(row_base + ((q ^ (r & 7)) << 4), l[0], l[1], l[2], l[3]);
      store_shared_u32x4(row_base + (((q + 1) ^ (r & 7)) << 4), h[0], h[1], h[2], h[3]);
    }
    // Weights: ldmatrix + convert, every k32 step of the stage, into registers.
    unsigned a[G::k_halves][8][4];
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int row = h * (G::k_bw / 2) + wg * 64 + warp * 16 + (lane & 15);
        const int chunk = 2 * kk + (lane >> 4);
        unsigned e[4];
        ldmatrix_x4(w_tile + row * 128 + ((chunk ^ (row & 7)) << 4), e[0], e[1], e[2], e[3]);
        e4m3x4_to_f16x4(e[0], a[h][2 * kk][0], a[h][2 * kk][2]);
        e4m3x4_to_f16x4(e[1], a[h][2 * kk][1], a[h][2 * kk][3]);
        e4m3x4_to_f16x4(e[2], a[h][2 * kk + 1][0], a[h][2 * kk + 1][2]);
        e4m3x4_to_f16x4(e[3], a[h][2 * kk + 1][1], a[h][2 * kk + 1][3]);
      }
    fence_proxy_async_shared();
    // The f16 tokens are complete, every wgmma of the stage before last has completed (each
    // thread waited before arriving), and this stage's e4m3 bytes have all been read.
    named_barrier(1, G::k_consumers);
    mbarrier_arrive(b.empty_bar + 8 * s);
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const unsigned long long b_desc =
          wgmma_desc_sw128(t16 + (j >> 2) * G::k_tok * 128) + 2 * (j & 3);
#pragma unroll
      for (int h = 0; h < G::k_halves; ++h)
        WgmmaRegA<G::k_mma_n>::mma(acc[h], a[h][j], b_desc, (kt | j) != 0);
    }
    wgmma_commit();
#pragma unroll
    for (int h = 0; h < G::k_halves; ++h)
      fence_registers(acc[h]);
    wgmma_wait<0>(); // the A registers are rewritten by the next stage
  }
}

template <class G>
__device__ __forceinline__ void moe_wgmma_consume(const MoeWgmmaBlock& b,
                                                  float (&acc)[G::k_halves][G::k_acc]) {
  if constexpr (G::k_fp8 && G::k_swap)
    moe_wgmma_consume_fp8_swap<G>(b, acc);
  else if constexpr (G::k_fp8)
    moe_wgmma_consume_fp8<G>(b, acc);
  else
    moe_wgmma_consume_bf16<G>(b, acc);
}

template <bool FP8, bool GATED, int N, int K, bool SWAP, int TOK, int BW, int WGS, int STAGES>
struct MoeWgmmaTraits : MoeWgmma<FP8, GATED, N, K, SWAP, TOK, BW, WGS, STAGES> {
  static constexpr bool k_gated = GATED;
  static constexpr bool k_swap = SWAP;
  static constexpr int k_tok = TOK;
  static constexpr int k_bw = BW;
  static constexpr int k_stages_value = STAGES;
  static constexpr int k_n = N;
  static constexpr bool k_fp8 = FP8;
};

// Calls store(token_row, column, v0, v1, pair) for each output this thread holds (token_row
// within the block of TOK slots, column within the tile's output columns). Gated: v = silu(gate
// * scale) * (up * scale) is computed here. Normal orientation hands out adjacent column pairs
// (pair = true, v1 at column + 1); swap-AB single values (pair = false).
template <class G, class Store>
__device__ __forceinline__ void moe_wgmma_outputs(const float (&acc)[G::k_halves][G::k_acc],
                                                  float scale, Store&& store) {
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  const int warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int row0 = 16 * warp + (lane >> 2);
  const int col0 = 2 * (lane & 3);
  auto value = [&](int h, int index) { return acc[h][index] * scale; };
  if constexpr (G::k_swap) {
#pragma unroll
    for (int j = 0; j < G::k_mma_n / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = wg * 64 + row0 + 8 * (e >> 1);
        const int token = 8 * j + col0 + (e & 1);
        float v = value(0, 4 * j + e);
        if constexpr (G::k_gated)
          v = moe_silu(v) * value(1, 4 * j + e);
        store(token, column, v, 0.0f, false);
      }
  } else {
    constexpr int k_groups = G::k_gated ? G::k_mma_n / 16 : G::k_mma_n / 8;
#pragma unroll
    for (int j = 0; j < k_groups; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int token = wg * 64 + row0 + 8 * half;
        float v0 = value(0, 4 * j + 2 * half), v1 = value(0, 4 * j + 2 * half + 1);
        if constexpr (G::k_gated) {
          v0 = moe_silu(v0) * value(0, 4 * (j + k_groups) + 2 * half);
          v1 = moe_silu(v1) * value(0, 4 * (j + k_groups) + 2 * half + 1);
        }
        store(token, 8 * j + col0, v0, v1, true);
      }
  }
}

// Shared setup: early exit past the padded count, the block's A rows and slots, the barriers.
// Returns false when the block has no work.
template <class G>
__device__ __forceinline__ bool
moe_wgmma_setup(const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
                int num_slots, int a_row_divisor, unsigned char* smem, unsigned long long* bars,
                int* a_rows, int* slot_of_row, MoeWgmmaBlock& b) {
  // Grouped rasterization over a 1-D grid: CTAs in launch order take k_group_blocks consecutive
  // token blocks (mostly one expert) for one weight tile, then the next tile, so the CTAs in
  // flight share weight tiles through L2 instead of each re-reading them from HBM.
  constexpr int k_group_blocks = 8;
  constexpr int k_tiles = G::k_n / G::k_out_cols;
  const int id = static_cast<int>(blockIdx.x);
  const int in_group = id % (k_group_blocks * k_tiles);
  const int m_block = id / (k_group_blocks * k_tiles) * k_group_blocks + in_group % k_group_blocks;
  b.m_block = m_block;
  b.tile = in_group / k_group_blocks;
  if (m_block * G::k_tok >= *num_post_padded)
    return false;
  b.expert = expert_ids[m_block];
  b.tiles = (shared_address(smem) + 1023) & ~1023u;
  b.full_bar = shared_address(bars);
  b.empty_bar = b.full_bar + 8 * G::k_stages_value;
  for (int r = static_cast<int>(threadIdx.x); r < G::k_tok; r += G::k_threads) {
    const int slot = sorted_ids[m_block * G::k_tok + r];
    const bool valid = slot >= 0 && slot < num_slots;
    slot_of_row[r] = valid ? slot : -1;
    a_rows[r] = valid ? slot / a_row_divisor : -1;
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < G::k_stages_value; ++s) {
      mbarrier_init(b.full_bar + 8 * s, 1 + 32);
      mbarrier_init(b.empty_bar + 8 * s, G::k_consumers);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  return true;
}

#define SPECJIT_MOE_WGMMA_PARAMS                                                                   \
  int N, int K, int SWAP, int TOK, int BW, int WGS, int STAGES, long long NUM_TOKENS_SPEC
#define SPECJIT_MOE_WGMMA_TRAITS(FP8, GATED)                                                      \
  MoeWgmmaTraits<FP8, GATED, N, K, SWAP != 0, TOK, BW, WGS, STAGES>

template <bool FP8, SPECJIT_MOE_WGMMA_PARAMS>
__device__ __forceinline__ void
moe_wgmma1_body(const TmaDesc& w13_map, const unsigned char* __restrict__ hidden,
                const int* __restrict__ sorted_ids, const int* __restrict__ expert_ids,
                const int* __restrict__ num_post_padded, const float* __restrict__ a1_scale,
                const float* __restrict__ w13_scale, const float* __restrict__ a2_scale,
                unsigned char* __restrict__ intermediate, int num_tokens, int top_k) {
  using G = SPECJIT_MOE_WGMMA_TRAITS(FP8, true);
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  __shared__ int a_rows[TOK];
  __shared__ int slot_of_row[TOK];
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  MoeWgmmaBlock b;
  if (!moe_wgmma_setup<G>(sorted_ids, expert_ids, num_post_padded, num_slots, top_k, smem, bars,
                          a_rows, slot_of_row, b))
    return;
  // GEMM2 may start now (programmatic launch): it streams its weights while this grid ends.
  grid_launch_dependents();
  const int tile = b.tile;
  if (static_cast<int>(threadIdx.x) >= G::k_consumers) {
    moe_wgmma_produce<G>(b, &w13_map, hidden, a_rows, tile * G::k_out_cols, N, false);
    return;
  }
  float acc[G::k_halves][G::k_acc];
  moe_wgmma_consume<G>(b, acc);
  float scale = 1.0f, inverse_out = 1.0f;
  if constexpr (FP8) {
    scale = a1_scale[0] * w13_scale[b.expert];
    inverse_out = div_rn(1.0f, a2_scale[0]);
  }
  moe_wgmma_outputs<G>(acc, scale, [&](int token, int column, float v0, float v1, bool pair) {
    const int slot = slot_of_row[token];
    if (slot < 0)
      return;
    const long long index = static_cast<long long>(slot) * N + tile * G::k_out_cols + column;
    if constexpr (FP8) {
      const unsigned packed = e4m3x2(v0 * inverse_out, v1 * inverse_out);
      if (pair)
        store_u16(intermediate + index, static_cast<unsigned short>(packed));
      else
        store_u8(intermediate + index, packed & 0xFF);
    } else {
      const unsigned packed = bf16x2(v0, v1);
      if (pair)
        store_u32(intermediate + index * 2, packed);
      else
        store_u16(intermediate + index * 2, static_cast<unsigned short>(packed));
    }
  });
}

template <bool FP8, SPECJIT_MOE_WGMMA_PARAMS>
__device__ __forceinline__ void
moe_wgmma2_body(const TmaDesc& w2_map, const unsigned char* __restrict__ intermediate,
                const int* __restrict__ sorted_ids, const int* __restrict__ expert_ids,
                const int* __restrict__ num_post_padded, const float* __restrict__ a2_scale,
                const float* __restrict__ w2_scale, const float* __restrict__ topk_weights,
                unsigned short* __restrict__ slot_out, int num_tokens, int top_k) {
  using G = SPECJIT_MOE_WGMMA_TRAITS(FP8, false);
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  __shared__ int a_rows[TOK];
  __shared__ int slot_of_row[TOK];
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  MoeWgmmaBlock b;
  if (!moe_wgmma_setup<G>(sorted_ids, expert_ids, num_post_padded, num_slots, 1, smem, bars,
                          a_rows, slot_of_row, b))
    return;
  const int tile = b.tile;
  if (static_cast<int>(threadIdx.x) >= G::k_consumers) {
    moe_wgmma_produce<G>(b, &w2_map, intermediate, a_rows, tile * G::k_out_cols, 0, true);
    return;
  }
  float acc[G::k_halves][G::k_acc];
  moe_wgmma_consume<G>(b, acc);
  float scale = 1.0f;
  if constexpr (FP8)
    scale = a2_scale[0] * w2_scale[b.expert];
  moe_wgmma_outputs<G>(acc, scale, [&](int token, int column, float v0, float v1, bool pair) {
    const int slot = slot_of_row[token];
    if (slot < 0)
      return;
    const float weight = topk_weights[slot];
    const unsigned packed = bf16x2(mul_rn(v0, weight), mul_rn(v1, weight));
    unsigned short* out = slot_out + static_cast<long long>(slot) * N + tile * G::k_out_cols + column;
    if (pair)
      store_u32(out, packed);
    else
      store_u16(out, static_cast<unsigned short>(packed));
  });
}

// The four entry points: {GEMM1, GEMM2} x {e4m3, bf16}. Block: 128 * WGS + 32 threads; dynamic
// shared memory: STAGES * (BW + TOK) * 128 bytes, FP8 more for the f16 tiles (normal:
// 2 * (BW + TOK) * 128, swap-AB: 4 * TOK * 128), and 1024 bytes of alignment slack. The weight tensor
// map is rank 3 over bytes: {K bytes, rows of one expert, experts}, box {128, BW (GEMM2) or
// BW / 2 (GEMM1: gate and up halves), 1}, 128-byte swizzle.
#define SPECJIT_MOE_WGMMA1_ARGS                                                                    \
  const __grid_constant__ TmaDesc w13_map, const unsigned char *__restrict__ hidden,               \
      const int *__restrict__ sorted_ids, const int *__restrict__ expert_ids,                      \
      const int *__restrict__ num_post_padded, const float *__restrict__ a1_scale,                 \
      const float *__restrict__ w13_scale, const float *__restrict__ a2_scale,                     \
      unsigned char *__restrict__ intermediate, int num_tokens, int top_k
#define SPECJIT_MOE_WGMMA1_CALL                                                                    \
  w13_map, hidden, sorted_ids, expert_ids, num_post_padded, a1_scale, w13_scale, a2_scale,         \
      intermediate, num_tokens, top_k
#define SPECJIT_MOE_WGMMA2_ARGS                                                                    \
  const __grid_constant__ TmaDesc w2_map, const unsigned char *__restrict__ intermediate,          \
      const int *__restrict__ sorted_ids, const int *__restrict__ expert_ids,                      \
      const int *__restrict__ num_post_padded, const float *__restrict__ a2_scale,                 \
      const float *__restrict__ w2_scale, const float *__restrict__ topk_weights,                  \
      unsigned short *__restrict__ slot_out, int num_tokens, int top_k
#define SPECJIT_MOE_WGMMA2_CALL                                                                    \
  w2_map, intermediate, sorted_ids, expert_ids, num_post_padded, a2_scale, w2_scale,               \
      topk_weights, slot_out, num_tokens, top_k

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(WGS * 128 + 32, 1) moe_wgmma1_fp8(SPECJIT_MOE_WGMMA1_ARGS) {
  moe_wgmma1_body<true, N, K, SWAP, TOK, BW, WGS, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_WGMMA1_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(WGS * 128 + 32, 1) moe_wgmma1_bf16(SPECJIT_MOE_WGMMA1_ARGS) {
  moe_wgmma1_body<false, N, K, SWAP, TOK, BW, WGS, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_WGMMA1_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(WGS * 128 + 32, 1) moe_wgmma2_fp8(SPECJIT_MOE_WGMMA2_ARGS) {
  moe_wgmma2_body<true, N, K, SWAP, TOK, BW, WGS, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_WGMMA2_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(WGS * 128 + 32, 1) moe_wgmma2_bf16(SPECJIT_MOE_WGMMA2_ARGS) {
  moe_wgmma2_body<false, N, K, SWAP, TOK, BW, WGS, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_WGMMA2_CALL);
}

#undef SPECJIT_MOE_WGMMA_PARAMS
#undef SPECJIT_MOE_WGMMA_TRAITS
#undef SPECJIT_MOE_WGMMA1_ARGS
#undef SPECJIT_MOE_WGMMA1_CALL
#undef SPECJIT_MOE_WGMMA2_ARGS
#undef SPECJIT_MOE_WGMMA2_CALL

} // namespace specjit_kernels
