// The two grouped GEMMs of the MoE layer on Hopper warp-group MMA (wgmma, sm_90a only), for
// e4m3 (W8A8 per tensor) and bf16; same contract and epilogues as moe/gemm.cu:
//   GEMM1  A = hidden [T, K] gathered by slot / top_k (the f16-token tiles: its f16 copy, in
//          token order gathered alike, or in sorted order loaded through tokens_map, one TMA box
//          per stage and K half), weights w13[e] [2N, K] (gate rows, then up rows); epilogue
//          silu(gate) * up, in sorted order (moe_intermediate_row) into the
//          intermediate [max padded, N] as e4m3 (divided by the static scale a2) or bf16.
//   GEMM2  A = the block's TOK intermediate rows, one TMA box per stage (no gather), weights
//          w2[e] [N, K]; epilogue times the router weight in fp32, per slot into slot_out
//          [T*k, N] bf16.
// Grid (fixed schedule): 1-D, ceil(blocks / 8) * 8 * (N / OUT_COLS / TILES) * SPLITK CTAs, each
// one (block of TOK sorted slots, TILES consecutive weight tiles of OUT_COLS output columns, part
// of K) in the order of `group_blocks` (moe_wgmma_setup); SPLITK > 1 (swap-AB): clusters of SPLITK
// CTAs split K (moe_wgmma_split_reduce); TILES > 1: the tiles go through one pipeline; launched for
// the worst-case block count, blocks at or past num_tokens_post_padded exit at once. GEMM2 is meant
// to be launched programmatically after GEMM1 (see moe_wgmma_produce), and with the block
// hand-off (GEMM1's `handoff` 1, GEMM2's `handoff_target` > 0; MoeDependence) it takes each
// token block as soon as GEMM1 has written it.
//
// Two orientations, picked per token-count bucket by the configuration table:
//   normal   each consumer warpgroup owns 64 token rows (wgmma's M); the weight tile's BW rows
//            are wgmma's N. TOK = 64 * WGS. For many tokens per expert.
//   swap-AB  the CTA owns 64 output columns: their 64 weight rows are wgmma's M (gated: two
//            MMAs, the gate rows and the up rows, into two accumulators) and the TOK tokens
//            are N (8..256); WGS warpgroups split K. For few tokens per expert: no wasted M.
// Either way the accumulator of a thread covers rows 16w + lane/4 (+8) and columns
// 8j + 2(lane%4) (+1) of its warpgroup's 64 x MMA_N tile. Pipeline and producers:
// moe/wgmma_pipeline.cuh, wgmma_persistent.cuh; consumers and their precision:
// moe/wgmma_stages.cuh, wgmma_consume.cuh, wgmma_consume_f16.cuh; sums of a split K:
// moe/wgmma_reduce.cuh; schedules: moe/wgmma_schedules.cuh. FP8 scales are applied once after
// the K loop.
#include "moe/wgmma_schedules.cuh"

namespace specjit_kernels {

// A gated GEMM1 output from its sums: silu(gate * scale) * (up * scale). Every GEMM1 epilogue
// computes it so, which keeps their values and rounding the same.
__device__ __forceinline__ float moe_gated(float gate, float up, float scale) {
  return moe_silu(gate * scale) * (up * scale);
}

// Calls store(token_row, column, v0, v1, pair) for each output this thread holds of a token row
// that is not padding (token_row within the block of TOK slots, column within the tile's output
// columns). Gated: v = silu(gate * scale) * (up * scale) is computed here, only for those rows
// (a padding row's sums may be anything, and running them through SiLU cost time:
// Nsight Compute on the f16-token GEMM1). Normal orientation hands out adjacent column pairs
// (pair = true, v1 at column + 1; only FP8 GEMM1 writes so: the other normal-orientation
// epilogues go through moe_normal_staged, for which FP8 GEMM1's f16 weight copy leaves no room in
// DeepSeek's tile of 256 weight rows); swap-AB single values (pair = false).
template <class G, class Store>
__device__ __forceinline__ void moe_wgmma_outputs(const MoeWgmmaBlock& b,
                                                  const float (&acc)[G::k_halves][G::k_acc],
                                                  float scale, Store&& store) {
  static_assert(!G::k_t16, "the f16-token GEMM1 writes its outputs with moe_t16_outputs");
  static_assert(G::k_swap || (G::k_gated && G::k_fp8), "normal orientation: FP8 GEMM1 only");
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  const int warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int row0 = 16 * warp + (lane >> 2);
  const int col0 = 2 * (lane & 3);
  auto value = [&](int h, int index) { return acc[h][index] * scale; };
  if constexpr (G::k_packed) {
    // Gate in this thread's accumulator (warps 0-1), up from moe_wgmma_pair_up's hand-over.
    if (warp >= 2)
      return;
    const float* up = reinterpret_cast<const float*>(b.tiles_generic) + G::k_acc * 128;
#pragma unroll
    for (int j = 0; j < G::k_mma_n / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = row0 + 8 * (e >> 1);
        const int token = 8 * j + col0 + (e & 1);
        if (b.slot_of_row[token] < 0)
          continue;
        const float v = moe_gated(acc[0][4 * j + e], up[column * G::k_tok + token], scale);
        store(token, column, v, 0.0f, false);
      }
  } else if constexpr (G::k_swap) {
#pragma unroll
    for (int j = 0; j < G::k_mma_n / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = row0 + 8 * (e >> 1);
        const int token = 8 * j + col0 + (e & 1);
        if (b.slot_of_row[token] < 0)
          continue;
        float v;
        if constexpr (G::k_gated)
          v = moe_gated(acc[0][4 * j + e], acc[1][4 * j + e], scale);
        else
          v = value(0, 4 * j + e);
        store(token, column, v, 0.0f, false);
      }
  } else { // FP8 GEMM1: gate sums in groups 0 .. k_groups - 1, up sums after them
    constexpr int k_groups = G::k_mma_n / 16;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int token = wg * 64 + row0 + 8 * half;
      if (b.slot_of_row[token] < 0)
        continue;
#pragma unroll
      for (int j = 0; j < k_groups; ++j) {
        const int i = 4 * j + 2 * half;
        store(token, 8 * j + col0, moe_gated(acc[0][i], acc[0][i + 4 * k_groups], scale),
              moe_gated(acc[0][i + 1], acc[0][i + 1 + 4 * k_groups], scale), true);
      }
    }
  }
}

// The f16-token GEMM1's outputs (swap-AB, each warpgroup 64 output columns of TOK tokens, FP8),
// through shared memory: the accumulator layout gives a thread single bytes of 4 token rows (one
// byte store per output, 64 a thread at TOK = 128), this one 16-byte piece per 16 columns of a
// token. Each warp's 16 columns of 8 tokens are one 8 x 8 matrix of byte pairs (columns c and
// c + 8 of a token), stored transposed by stmatrix, so a token's 16 bytes land as c0 c8 c1 c9
// ... c7 c15 and byte permutes put them in order on the way out. Values: moe_gated, then e4m3 of
// value / a2, as the other GEMM1 epilogues. Staging: [TOK][64 bytes] a warpgroup after the
// stages (the host's moe_gemm_shared_bytes), a row's 16-byte pieces rotated by (token / 2) % 4,
// so that the 8 rows of a matrix, and the 2 rows 8 lanes read, fall in different banks. Groups
// of 8 tokens past the block's used rows are skipped; padding rows among them are not stored.
template <class G>
__device__ __forceinline__ void moe_t16_outputs(const MoeWgmmaBlock& b,
                                                const float (&acc)[G::k_halves][G::k_acc],
                                                float scale, float inverse_out,
                                                unsigned char* out, int n) {
  static_assert(G::k_t16 && G::k_fp8 && G::k_halves == 2, "f16-token GEMM1 only");
  const int tid = static_cast<int>(threadIdx.x) & 127, wg = static_cast<int>(threadIdx.x) >> 7;
  const int warp = tid >> 5, lane = tid & 31;
  const unsigned staging = b.tiles + G::k_stages_value * G::k_stage_bytes + wg * G::k_tok * 64;
  auto piece = [](int token, int chunk) { return token * 64 + 16 * (chunk ^ ((token >> 1) & 3)); };
  constexpr int k_groups = G::k_mma_n / 8;            // groups of 8 tokens
  constexpr int k_per = k_groups < 4 ? k_groups : 4; // matrices per stmatrix
#pragma unroll
  for (int g0 = 0; g0 < k_groups; g0 += k_per) {
    if (8 * g0 >= b.used_rows)
      break;
    unsigned r[k_per];
#pragma unroll
    for (int m = 0; m < k_per; ++m) {
      float v[4]; // (c, t), (c, t + 1), (c + 8, t), (c + 8, t + 1)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * (g0 + m) + e;
        v[e] = moe_gated(acc[0][i], acc[1][i], scale) * inverse_out;
      }
      r[m] = e4m3x4(v[0], v[2], v[1], v[3]); // token t's pair, then token t + 1's
    }
    stmatrix<k_per, true>(staging + piece(8 * g0 + lane, warp), r); // lane 8m + k: token 8(g0+m)+k
  }
  named_barrier(6 + wg, 128);
#pragma unroll
  for (int p = tid; p < G::k_tok * 4; p += 128) {
    const int token = p >> 2, chunk = p & 3;
    if (token >= b.used_rows || b.slot_of_row[token] < 0)
      continue;
    const U32x4 w = load_shared_u32x4(staging + piece(token, chunk));
    U32x4 o;
    o.x = byte_perm(w.x, w.y, 0x6420); // columns 0-3 of the piece
    o.y = byte_perm(w.z, w.w, 0x6420); // 4-7
    o.z = byte_perm(w.x, w.y, 0x7531); // 8-11
    o.w = byte_perm(w.z, w.w, 0x7531); // 12-15
    store_u32x4(out + moe_intermediate_row<G::k_tok>(b.m_block, token) * n + wg * 64 + chunk * 16,
                o);
  }
  named_barrier(6 + wg, 128); // the staging is free for the next tile
}

// The normal orientation's outputs, both GEMMs, through shared memory: the accumulator layout gives
// a thread 2- or 4-byte pieces of two rows (GEMM2 at 128 columns: 32 stores a thread, each warp
// instruction 8 rows x 16 bytes), this one 16-byte pieces (a warp instruction, 4 rows x 128
// bytes). A warp's outputs of 8 rows x 16 bytes are one 8 x 8 matrix of 16-bit elements for
// stmatrix, not transposed; each warp stages its own 16 rows, 128 bytes of each at a time, so only
// the warp synchronizes. Staging: [16][128 bytes] a warp after the stages (the host's
// moe_gemm_shared_bytes), a row's pieces rotated by row % 8, so that neither a matrix's 8 rows nor
// the 8 lanes reading a row share banks. ROW_BYTES: the bytes of a tile's output row.
// reg(p, h): this thread's 32-bit element of 16-byte piece p of its row lane / 4 + 8h (of the
// warp's 16; moe_normal_row); store(token, p, v): piece p of the block's token row `token`, to be
// stored unless the row is padding. Warps whose rows are all past the block's used rows skip it.
__device__ __forceinline__ int moe_normal_row() {
  const int tid = static_cast<int>(threadIdx.x);
  return (tid >> 7) * 64 + 16 * ((tid >> 5) & 3) + ((tid & 31) >> 2);
}

template <class G, int ROW_BYTES, class Reg, class Store>
__device__ __forceinline__ void moe_normal_staged(const MoeWgmmaBlock& b, Reg&& reg,
                                                  Store&& store) {
  static_assert(!G::k_swap, "normal orientation only");
  constexpr int k_chunk = ROW_BYTES < 128 ? ROW_BYTES : 128; // bytes of a row staged at a time
  constexpr int k_pieces = k_chunk / 16;
  constexpr int k_reads = 16 * k_pieces / 32; // pieces a lane stores per chunk
  static_assert(ROW_BYTES % k_chunk == 0 && k_pieces % 2 == 0, "whole pairs of 16-byte pieces");
  const int tid = static_cast<int>(threadIdx.x) & 127, wg = static_cast<int>(threadIdx.x) >> 7;
  const int warp = tid >> 5, lane = tid & 31;
  const int row0 = wg * 64 + 16 * warp; // the warp's first token row
  if (row0 >= b.used_rows)
    return;
  const unsigned staging =
      b.tiles + G::k_stages_value * G::k_stage_bytes + (4 * wg + warp) * 16 * k_chunk;
  auto piece = [](int row, int p) { return row * k_chunk + 16 * (p ^ (row & (k_pieces - 1))); };
  const int m = lane >> 3; // the matrix whose row lane % 8 this lane addresses
#pragma unroll
  for (int c = 0; c < ROW_BYTES / k_chunk; ++c) {
#pragma unroll
    for (int j = 0; j < k_pieces; j += 2) {
      unsigned r[4]; // matrix mm: rows 8 (mm % 2) + 0..7, piece j + mm / 2 of the chunk
#pragma unroll
      for (int mm = 0; mm < 4; ++mm)
        r[mm] = reg(c * k_pieces + j + (mm >> 1), mm & 1);
      stmatrix<4>(staging + piece(8 * (m & 1) + (lane & 7), j + (m >> 1)), r);
    }
    __syncwarp();
#pragma unroll
    for (int q = 0; q < k_reads; ++q) {
      const int row = (32 * q + lane) / k_pieces, p = (32 * q + lane) % k_pieces;
      store(row0 + row, c * k_pieces + p, load_shared_u32x4(staging + piece(row, p)));
    }
    __syncwarp(); // the staging is free for the next chunk
  }
}

#define SPECJIT_MOE_WGMMA_PARAMS                                                                   \
  int N, int K, MoeOrientation ORIENTATION, int TOK, int BW, int WGS, int STAGES, int SPLITK,      \
      MoeSchedule SCHEDULE, int TILES, MoeWeightReads WEIGHTS, long long NUM_TOKENS_SPEC
#define SPECJIT_MOE_WGMMA_VALUES                                                                   \
  N, K, ORIENTATION, TOK, BW, WGS, STAGES, SPLITK, SCHEDULE, TILES, WEIGHTS, NUM_TOKENS_SPEC
#define SPECJIT_MOE_WGMMA_TRAITS(FP8, GATED, E4M3, WHOLE_K)                                        \
  MoeWgmmaTraits<FP8, GATED, N, K, ORIENTATION, TOK, BW, WGS, STAGES, SPLITK, SCHEDULE, TILES,     \
                 WEIGHTS, E4M3, WHOLE_K>

template <bool FP8, bool E4M3, bool WHOLE_K, SPECJIT_MOE_WGMMA_PARAMS>
__device__ __forceinline__ void
moe_wgmma1_body(const TmaDesc& w13_map, const TmaDesc& tokens_map,
                const unsigned char* __restrict__ hidden, const int* __restrict__ sorted_ids,
                const int* __restrict__ expert_ids, const int* __restrict__ num_post_padded,
                const float* __restrict__ a1_scale, const float* __restrict__ w13_scale,
                const float* __restrict__ a2_scale, unsigned char* __restrict__ intermediate,
                unsigned char* __restrict__ scratch, int handoff, int group_blocks, int num_tokens,
                int top_k, const unsigned char* __restrict__ w13_packed) {
  using G = SPECJIT_MOE_WGMMA_TRAITS(FP8, true, E4M3, WHOLE_K);
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  auto epilogue = [&](const MoeWgmmaBlock& b, const float(&acc)[G::k_halves][G::k_acc]) {
    const int tile = b.tile;
    float scale = 1.0f, inverse_out = 1.0f;
    if constexpr (FP8) {
      scale = moe_ldg(a1_scale) * moe_ldg(w13_scale + b.expert);
      inverse_out = div_rn(1.0f, moe_ldg(a2_scale));
    }
    if constexpr (G::k_t16) {
      moe_t16_outputs<G>(b, acc, scale, inverse_out, intermediate + tile * G::k_out_cols, N);
    } else if constexpr (!G::k_swap && !FP8) {
      // Group j (8 columns) of half h (row lane / 4 + 8h): gate sums 4j + 2h + e, up sums k_up
      // groups on.
      constexpr int k_up = G::k_mma_n / 16;
      moe_normal_staged<G, G::k_out_cols * 2>(
          b,
          [&](int j, int h) -> unsigned {
            const int i = 4 * j + 2 * h;
            return bf16x2(moe_gated(acc[0][i], acc[0][i + 4 * k_up], scale),
                          moe_gated(acc[0][i + 1], acc[0][i + 1 + 4 * k_up], scale));
          },
          [&](int token, int p, U32x4 v) {
            if (b.slot_of_row[token] >= 0)
              store_u32x4(intermediate + (moe_intermediate_row<G::k_tok>(b.m_block, token) * N +
                                          tile * G::k_out_cols + 8 * p) *
                                             2,
                          v);
          });
    } else {
      moe_wgmma_outputs<G>(
          b, acc, scale, [&](int token, int column, float v0, float v1, bool pair) {
            const long long index = moe_intermediate_row<G::k_tok>(b.m_block, token) * N +
                                    tile * G::k_out_cols + column;
            if constexpr (FP8) {
              const unsigned packed = e4m3x2(v0 * inverse_out, v1 * inverse_out);
              if (pair)
                store_u16(intermediate + index, static_cast<unsigned short>(packed));
              else
                store_u8(intermediate + index, packed & 0xFF);
            } else {
              store_u16(intermediate + index * 2, static_cast<unsigned short>(bf16x2(v0, v1)));
            }
          });
    }
    if (handoff) // GEMM2 takes the block once all its tiles are in
      moe_handoff_signal(scratch, b.m_block);
  };
  moe_wgmma_run<G>(MoeWeights{&w13_map, w13_packed}, hidden, &tokens_map, sorted_ids, expert_ids,
                   num_post_padded, num_slots, top_k, N, group_blocks, MoeDependence{}, scratch,
                   epilogue);
}

template <bool FP8, bool WHOLE_K, SPECJIT_MOE_WGMMA_PARAMS>
__device__ __forceinline__ void
moe_wgmma2_body(const TmaDesc& w2_map, const TmaDesc& intermediate_map,
                const int* __restrict__ sorted_ids, const int* __restrict__ expert_ids,
                const int* __restrict__ num_post_padded, const float* __restrict__ a2_scale,
                const float* __restrict__ w2_scale, const float* __restrict__ topk_weights,
                unsigned short* __restrict__ slot_out, unsigned char* __restrict__ scratch,
                int handoff_target, int group_blocks, int num_tokens, int top_k,
                const unsigned char* __restrict__ w2_packed) {
  using G = SPECJIT_MOE_WGMMA_TRAITS(FP8, false, false, WHOLE_K);
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  auto epilogue = [&](const MoeWgmmaBlock& b, const float(&acc)[G::k_halves][G::k_acc]) {
    const int tile = b.tile;
    float scale = 1.0f;
    if constexpr (FP8)
      scale = moe_ldg(a2_scale) * moe_ldg(w2_scale + b.expert);
    if constexpr (!G::k_swap) {
      const int row = moe_normal_row();
      float weight[2]; // of this thread's rows row and row + 8
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = b.slot_of_row[row + 8 * h];
        weight[h] = slot >= 0 ? moe_ldg(topk_weights + slot) : 0.0f;
      }
      moe_normal_staged<G, G::k_out_cols * 2>(
          b,
          [&](int p, int h) -> unsigned {
            const int i = 4 * p + 2 * h;
            return bf16x2(mul_rn(acc[0][i] * scale, weight[h]),
                          mul_rn(acc[0][i + 1] * scale, weight[h]));
          },
          [&](int token, int p, U32x4 v) {
            const int slot = b.slot_of_row[token];
            if (slot >= 0)
              store_u32x4(slot_out + static_cast<long long>(slot) * N + tile * G::k_out_cols + 8 * p,
                          v);
          });
    } else {
      moe_wgmma_outputs<G>(b, acc, scale, [&](int token, int column, float v, float, bool) {
        const int slot = b.slot_of_row[token];
        const unsigned packed = bf16x2(mul_rn(v, moe_ldg(topk_weights + slot)), 0.0f);
        store_u16(slot_out + static_cast<long long>(slot) * N + tile * G::k_out_cols + column,
                  static_cast<unsigned short>(packed));
      });
    }
  };
  MoeDependence d;
  d.depends = true;
  if (handoff_target > 0) {
    d.counters = reinterpret_cast<int*>(scratch) + k_handoff_counters;
    d.target = handoff_target;
  }
  moe_wgmma_run<G>(MoeWeights{&w2_map, w2_packed}, nullptr, &intermediate_map, sorted_ids,
                   expert_ids, num_post_padded, num_slots, 0, 0, group_blocks, d, scratch,
                   epilogue);
}

// The entry points: {GEMM1, GEMM2} x {e4m3, bf16}, FP8 GEMM1 with e4m3 accumulation and FP8 GEMM2
// over the whole K, each taking its GEMM's argument struct
// (moe/gemm_args.h, which describes the tensor maps) as a __grid_constant__, so that its tensor
// maps stay in parameter space. Block: 128 * WGS threads and the producer warps (normal and
// f16-token GEMM1: 4, otherwise 1; MoeWgmma::k_producer_warps); dynamic shared memory:
// STAGES * (BW + TOK) * 128 bytes, FP8 GEMM1 more for the f16 copy of its B operand (normal: the
// weights, 2 * BW * 128; swap-AB: the tokens, 4 * WGS * TOK * 128), and 1024 bytes of alignment
// slack. The weight maps use the 128-byte swizzle, as do GEMM2's intermediate map and GEMM1's
// tokens_map (read by the swap_ab_f16_sorted tiles only); the swap_ab_f16_tokens tiles read their
// f16 copy in token order through `hidden`.
#define SPECJIT_MOE_WGMMA1_CALL                                                                    \
  args.w13_map, args.tokens_map, args.hidden, args.sorted_ids, args.expert_ids,                    \
      args.num_post_padded, args.a1_scale, args.w13_scale, args.a2_scale, args.intermediate,       \
      args.scratch, args.handoff, args.group_blocks, args.num_tokens, args.top_k, args.w13_packed
#define SPECJIT_MOE_WGMMA2_CALL                                                                    \
  args.w2_map, args.intermediate_map, args.sorted_ids, args.expert_ids, args.num_post_padded,      \
      args.a2_scale, args.w2_scale, args.topk_weights, args.slot_out, args.scratch,                \
      args.handoff_target, args.group_blocks, args.num_tokens, args.top_k, args.w2_packed

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(true, true, false, false)::k_threads, 1)
    moe_wgmma1_fp8(const __grid_constant__ MoeWgmmaGemm1Args args) {
  moe_wgmma1_body<true, false, false, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA1_CALL);
}

// FP8 GEMM1 with e4m3 accumulation: e4m3 MMAs promoted once a stage (moe_consume_e4m3), for
// the orientations that read e4m3 tokens (normal, swap_ab). No f16 copy in shared memory.
template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(true, true, true, false)::k_threads, 1)
    moe_wgmma1_e4m3(const __grid_constant__ MoeWgmmaGemm1Args args) {
  moe_wgmma1_body<true, true, false, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA1_CALL);
}

// FP8 GEMM1 with e4m3 accumulation over the whole K: the e4m3 MMAs accumulate in place, read
// once after the K loop (moe_consume_direct, as the peer's tl.dot on sm_90), no partial sums.
template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(true, true, true, true)::k_threads, 1)
    moe_wgmma1_e4m3w(const __grid_constant__ MoeWgmmaGemm1Args args) {
  moe_wgmma1_body<true, true, true, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA1_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(false, true, false, false)::k_threads, 1)
    moe_wgmma1_bf16(const __grid_constant__ MoeWgmmaGemm1Args args) {
  moe_wgmma1_body<false, false, false, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA1_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(true, false, false, false)::k_threads, 1)
    moe_wgmma2_fp8(const __grid_constant__ MoeWgmmaGemm2Args args) {
  moe_wgmma2_body<true, false, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA2_CALL);
}

// FP8 GEMM2 with its e4m3 MMAs accumulating over the whole K in place (moe_consume_direct
// without promotion, as GEMM1's e4m3w): no partial sums, so the normal orientation keeps a group
// of MMAs in flight across stages and 256-wide tiles fit (128 accumulators a thread).
template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(true, false, false, true)::k_threads, 1)
    moe_wgmma2_e4m3w(const __grid_constant__ MoeWgmmaGemm2Args args) {
  moe_wgmma2_body<true, true, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA2_CALL);
}

template <SPECJIT_MOE_WGMMA_PARAMS>
__global__ void __launch_bounds__(SPECJIT_MOE_WGMMA_TRAITS(false, false, false, false)::k_threads, 1)
    moe_wgmma2_bf16(const __grid_constant__ MoeWgmmaGemm2Args args) {
  moe_wgmma2_body<false, false, SPECJIT_MOE_WGMMA_VALUES>(SPECJIT_MOE_WGMMA2_CALL);
}

#undef SPECJIT_MOE_WGMMA_PARAMS
#undef SPECJIT_MOE_WGMMA_VALUES
#undef SPECJIT_MOE_WGMMA_TRAITS
#undef SPECJIT_MOE_WGMMA1_CALL
#undef SPECJIT_MOE_WGMMA2_CALL

} // namespace specjit_kernels
