// The machinery of the wgmma MoE GEMMs (moe/gemm_wgmma.cu): tile traits and CTA setup.
// Pipeline: STAGES deep, 128 bytes of K per stage; producer warps fill a stage and complete its
// `full` mbarrier (moe/wgmma_produce.cuh), consumers arrive on `empty` once the stage is read.
//
// Three schedules (MoeSchedule, moe/gemm_args.h). Fixed: each CTA of a grid launched for the worst
// case computes one token block's TILES consecutive weight tiles (a K part of them with split-K),
// in grouped order. Stream-K (swap-AB): a grid of as many CTAs as fit on the GPU at once, each
// taking an equal, contiguous share of all (token block, tile, K stage) steps, so that no SM
// idles while others finish a last wave, and no CTA pays a setup and pipeline fill per tile
// (their producers: moe/wgmma_persistent.cuh; split tiles meet in global memory).
#pragma once

#include "common/fp8.cuh"
#include "common/spec.cuh"
#include "common/wgmma.cuh"
#include "moe/gemm_args.h"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

// Stream-K's global scratch (the workspace's): k_stream_k_max_ctas arrival counters (zeroed by
// moe_align, left zero by the GEMMs), then the partial sums, two slots of a tile's sums (64 x
// TOK per MMA) per CTA. ops/moe/detail.h has the same numbers and the slots' size
// (k_stream_k_slot_floats), and caps the grid so that the slots fit.
inline constexpr int k_stream_k_max_ctas = 1024;
// Then the dynamic schedule's two counters per GEMM (next tile, CTAs done); the slots follow all
// k_scratch_counters counters.
inline constexpr int k_dynamic_counters = k_stream_k_max_ctas;
inline constexpr int k_scratch_counters = k_stream_k_max_ctas + 4;
// Then the block hand-off's (MoeDependence): GEMM2's count of producers done, and one counter per
// token block. The slots follow all k_scratch_ints ints.
inline constexpr int k_handoff_done = k_scratch_counters;
inline constexpr int k_handoff_counters = k_handoff_done + 1;
inline constexpr int k_handoff_blocks = 4096;
inline constexpr int k_scratch_ints = k_handoff_counters + k_handoff_blocks;
// ORIENTATION: normal (gathering the token rows, or reading a sorted e4m3 copy), swap-AB, or
// swap-AB reading an f16 copy of the tokens (FP8 GEMM1: k_t16 below) in token order or in sorted
// order. SCHEDULE: fixed (TILES tiles a CTA), stream-K or
// dynamic (TILES 1).
template <bool FP8, bool GATED, int N, int K, MoeOrientation ORIENTATION, int TOK, int BW, int WGS,
          int STAGES, int SPLITK, MoeSchedule SCHEDULE, int TILES>
struct MoeWgmma {
  static constexpr bool k_swap_ab =
      ORIENTATION != MoeOrientation::normal && ORIENTATION != MoeOrientation::normal_sorted;
  static constexpr int k_k_bytes = K * (FP8 ? 1 : 2);
  // FP8 GEMM1, swap-AB, for many tokens an expert: the tokens come from a copy converted to f16
  // once per call (moe/tokens_f16.cu, in the k order of the register-A fragments), so no CTA
  // converts its token tile, and the wgmmas read them from the stage (256 bytes a row and stage,
  // two 128-byte halves of K). The warpgroups split the output columns, 64 each (their gate and
  // up rows), over the same tokens. The copy is in one of two orders (the host's rule,
  // f16_tokens_sorted in ops/moe/detail.h):
  //   swap_ab_f16_tokens, token order [T, K]: the producers gather the block's rows (cp.async);
  //   swap_ab_f16_sorted, sorted order (row p: the token of slot sorted_ids[p]): one producer
  //           loads the block's rows as two TMA boxes a stage. No gather, but the copy holds
  //           top_k rows per token.
  static constexpr bool k_t16 = ORIENTATION == MoeOrientation::swap_ab_f16_tokens ||
                                ORIENTATION == MoeOrientation::swap_ab_f16_sorted;
  static constexpr bool k_t16_sorted = ORIENTATION == MoeOrientation::swap_ab_f16_sorted;
  // Token rows from a copy in the slots' sorted order, by TMA: f16 (swap-AB) or e4m3 (normal).
  static constexpr bool k_a_sorted = k_t16_sorted || ORIENTATION == MoeOrientation::normal_sorted;
  // Bytes of the gathered token rows per byte of the weights' K (f16 tokens: 2 per e4m3 value).
  static constexpr int k_t_bytes_per_k = k_t16 ? 2 : 1;
  static constexpr int k_a_row_bytes = k_k_bytes * k_t_bytes_per_k; // a gathered token row
  static constexpr int k_t_tile_bytes = TOK * 128 * k_t_bytes_per_k;
  // Split-K: each CTA of a cluster of SPLITK takes k_k_tiles consecutive 128-byte stages of K.
  static constexpr int k_split_k = SPLITK;
  static constexpr int k_k_tiles = k_k_bytes / 128 / SPLITK;
  static constexpr int k_consumers = 128 * WGS;
  // Producer warps: the normal orientation's GEMM1 gathers 64 * WGS token rows per stage (eight
  // 16-byte cp.async per row), too many instructions for one warp to keep up with the tensor
  // cores; four warps share them (k_producers threads load), and so do the f16-token GEMM1's in
  // token order (16 per row). Everything else loads with one (GEMM2 and the GEMM1s on a sorted
  // copy gather nothing); those GEMM1s still launch a whole producer warpgroup, whose registers
  // their consumers take (k_producer_regs; an SM quarter holds three of 9 warps at 168
  // registers), and its other three warps exit. The host launches the same count
  // (ops/moe/config.cpp, GemmTile::threads); the launch bounds use k_threads.
  static constexpr int k_producer_warps = GATED && (!k_swap_ab || k_t16) ? 4 : 1;
  static constexpr int k_producers = k_a_sorted ? 32 : 32 * k_producer_warps;
  static constexpr int k_threads = k_consumers + 32 * k_producer_warps;
  static constexpr int k_w_tile_bytes = BW * 128;
  // Registers moved from the producer warpgroup to the consumers (setmaxnreg), for tiles whose
  // consumers need more than an even share of the register file (65536 / k_threads, 168 at 384
  // threads): the normal orientation's FP8 GEMM1 256 columns wide in two warpgroups (128
  // accumulators a thread, and the A fragments). 0: no move.
  // Likewise k_t16 in two warpgroups (TOK accumulators a thread and a stage of A fragments);
  // under the dynamic schedule the gathering producers keep its state too (the tile from the
  // counter, the block's rows): 40 registers spilled 12 bytes there, 56 none. The consumers take
  // the rest of the launch's share (232 against 40, 224 against 56).
  static constexpr int k_producer_regs =
      FP8 && GATED && WGS == 2 && ((!k_swap_ab && BW == 256) || k_t16)
          ? (SCHEDULE == MoeSchedule::dynamic && !k_a_sorted ? 56 : 40)
          : 0;
  static constexpr int k_consumer_regs =
      k_producer_regs == 0
          ? 0
          : (65536 / k_threads / 8 * 8 * k_threads - k_producer_regs * 32 * k_producer_warps) /
                k_consumers / 8 * 8;
  static constexpr int k_stage_bytes = BW * 128 + k_t_tile_bytes;
  static constexpr int k_out_cols = GATED ? BW / 2 : BW;
  // Swap-AB: the warpgroups split K (each takes every WGS-th stage) over the same 64 output
  // columns; normal: they split the token rows; k_t16: the output columns.
  static constexpr int k_split = k_swap_ab && !k_t16 ? WGS : 1;
  static constexpr int k_empty_arrivals = 128 * WGS / k_split;
  static constexpr int k_mma_n = k_swap_ab ? TOK : BW;
  // Swap-AB GEMM1: BW = 128 runs the 64 gate rows and the 64 up rows as two MMAs into two
  // accumulators; BW = 64 packs 32 gate rows over 32 up rows into one MMA (twice the CTAs for
  // the same weights, gate and up meet through shared memory in the epilogue).
  static constexpr bool k_packed = k_swap_ab && GATED && BW == 64;
  static constexpr int k_halves = k_swap_ab && GATED && !k_packed ? 2 : 1;
  static constexpr int k_acc = k_mma_n / 2;
  // GEMM2 and the GEMM1s on a sorted copy load their token rows with TMA (no gather): the stage's
  // only arrival is the producer's.
  static constexpr bool k_a_tma = !GATED || k_a_sorted;
  static constexpr int k_full_arrivals = k_a_tma ? 1 : 1 + k_producers;
  // Weight tiles per CTA, one after the other through one continuous pipeline (the next tile's
  // weights and tokens stream in while the consumers write this tile's outputs): fewer, longer
  // CTAs for GEMMs whose K is a few stages only, and (normal orientation) one CTA setup and
  // pipeline fill for several tiles of the same token block.
  static constexpr int k_tiles_per_cta = SCHEDULE == MoeSchedule::fixed ? TILES : 1;
  static constexpr int k_steps = k_k_tiles * k_tiles_per_cta; // stages a CTA streams (fixed)
  // Stream-K: one consumer warpgroup, blocks of up to 32 tokens, no split-K clusters, no packed
  // GEMM1 (its epilogue borrows the stage memory, which the next tile's stages already fill).
  static constexpr bool k_stream_k = SCHEDULE == MoeSchedule::stream_k;
  // Dynamic: the same resident grid, each CTA taking whole tiles from a global counter as it
  // frees up; swap-AB with stream-K's restrictions but no limit on TOK (nothing is split), or
  // the normal orientation.
  static constexpr bool k_dynamic = SCHEDULE == MoeSchedule::dynamic;

  static_assert(k_k_bytes % (128 * SPLITK) == 0, "K must fill 128-byte rows in every split");
  static_assert(SPLITK == 1 || k_swap_ab, "split-K: swap-AB only");
  static_assert(k_k_tiles >= WGS, "a stage for every warpgroup");
  // Swap-AB with K split across two warpgroups: warpgroup w takes the steps of parity w, so with
  // an even number of stages every stage belongs to one warpgroup, which waits for its uses in
  // order. With an odd number, a warpgroup could wait on a stage whose previous use (the other
  // warpgroup's) has not landed yet, and its one-bit phase parity would match the use before.
  static_assert(k_split == 1 || STAGES % 2 == 0,
                "swap-AB with two warpgroups: an even number of stages");
  static_assert(SCHEDULE == MoeSchedule::fixed ? TILES >= 1 && TILES <= 64 : TILES == 1,
                "fixed: 1 to 64 tiles a CTA; the persistent schedules take tiles one at a time");
  static_assert(k_tiles_per_cta == 1 || !k_swap_ab || k_t16 ||
                    (WGS == 1 && SPLITK == 1 && !(GATED && BW == 64)),
                "several tiles per CTA, swap-AB: one warpgroup, no split-K, not packed");
  static_assert(!k_stream_k ||
                    (k_swap_ab && WGS == 1 && SPLITK == 1 && !(GATED && BW == 64) && TOK <= 32),
                "stream-K: swap-AB, one warpgroup, no split-K, not packed, TOK <= 32");
  static_assert(!k_dynamic ||
                    (SPLITK == 1 && (!k_swap_ab || ((WGS == 1 || k_t16) && !(GATED && BW == 64)))),
                "dynamic: no split-K; swap-AB: one warpgroup (f16 tokens: one or two), not packed");
  static_assert((N / k_out_cols) % k_tiles_per_cta == 0, "whole tiles per CTA");
  static_assert(STAGES >= 3 && STAGES <= 8, "3 to 8 stages");
  static_assert(N % k_out_cols == 0, "N must be a multiple of the tile's output columns");
  static_assert(!k_swap_ab || k_out_cols == 64 * (k_t16 ? WGS : 1) || k_packed,
                "swap-AB: 64 output columns per CTA (k_t16: per warpgroup)");
  static_assert(!k_t16 || (FP8 && GATED && SPLITK == 1 && !k_stream_k && TOK <= 128),
                "f16 tokens: FP8 GEMM1, no split-K, fixed or dynamic schedule, TOK <= 128");
  static_assert(WGS == 1 || WGS == 2, "one or two consumer warpgroups");
  static_assert(k_swap_ab || TOK == 64 * WGS, "normal: 64 token rows per warpgroup");
  static_assert(k_mma_n == 8 || k_mma_n == 16 || k_mma_n == 32 || k_mma_n == 64 || k_mma_n == 128 ||
                    k_mma_n == 256,
                "a tile's wgmma N must be one of 8, 16, 32, 64, 128, 256");
  // Swap-AB: a block that holds fewer tokens than TOK runs its MMAs at the narrowest multiple of
  // k_width_step that covers them (moe_with_width), at most 4 widths per tile.
  static constexpr int k_width_step = k_swap_ab ? (TOK / 4 < 8 ? 8 : TOK / 4) : k_mma_n;
  static_assert(TOK % 8 == 0 && BW % 16 == 0, "tiles are whole 8-row swizzle atoms");
  static_assert(k_producer_regs == 0 ||
                    (k_producer_warps == 4 &&
                     k_producer_regs * 32 * k_producer_warps + k_consumer_regs * k_consumers <=
                         65536 / k_threads / 8 * 8 * k_threads),
                "registers move between whole warpgroups, within the launch's share");
};

// Everything one CTA needs, set up before the main loop.
struct MoeWgmmaBlock {
  int tile;    // weight tile (k_out_cols output columns) being computed
  int m_block; // token block (TOK sorted slots)
  int expert;
  int k_tile0;                  // first 128-byte stage of K of this CTA (split-K)
  unsigned tiles;               // shared address of stage 0 (1024-byte aligned)
  unsigned char* tiles_generic; // the same, as a generic pointer
  const int* slot_of_row;       // shared [TOK]: slot of each token row, -1 for padding
  int used_rows;                // the rows up to the block's last slot (the rest is padding)
  unsigned full_bar;            // shared address of full[0] (8 bytes per stage)
  unsigned empty_bar;           // shared address of empty[0]
};

// WEIGHTS: how the producer reads the weights (MoeWeights in moe/wgmma_produce.cuh), a template
// value so that each variant holds only its own loads. E4M3 (FP8 GEMM1, not with f16 tokens):
// e4m3 MMAs on the stage's bytes, promoted into fp32 registers (moe_consume_e4m3), instead of
// f16 MMAs on exact conversions (the `exact` accumulation); WHOLE_K: those MMAs (FP8 GEMM2: its
// e4m3 MMAs) accumulate over the whole K in place, without promotion (moe_consume_direct).
template <bool FP8, bool GATED, int N, int K, MoeOrientation ORIENTATION, int TOK, int BW, int WGS,
          int STAGES, int SPLITK, MoeSchedule SCHEDULE, int TILES,
          MoeWeightReads WEIGHTS = MoeWeightReads::row_major_map, bool E4M3 = false,
          bool WHOLE_K = false>
struct MoeWgmmaTraits
    : MoeWgmma<FP8, GATED, N, K, ORIENTATION, TOK, BW, WGS, STAGES, SPLITK, SCHEDULE, TILES> {
  using Base =
      MoeWgmma<FP8, GATED, N, K, ORIENTATION, TOK, BW, WGS, STAGES, SPLITK, SCHEDULE, TILES>;
  static_assert(!E4M3 || (FP8 && GATED && !Base::k_t16),
                "e4m3 MMAs: FP8 GEMM1 on its e4m3 tokens (GEMM2 always uses them)");
  static_assert(!WHOLE_K || E4M3 || (FP8 && !GATED),
                "whole-K accumulation is for e4m3 MMAs (FP8 GEMM1 with E4M3, FP8 GEMM2)");
  static_assert(ORIENTATION != MoeOrientation::normal_sorted || E4M3,
                "the sorted e4m3 copy of the tokens is for e4m3 MMAs");
  static constexpr bool k_e4m3_mma = E4M3;
  static constexpr bool k_e4m3_whole_k = WHOLE_K;
  static constexpr MoeWeightReads k_weights = WEIGHTS;
  static constexpr bool k_gated = GATED;
  static constexpr bool k_swap = Base::k_swap_ab;
  static constexpr int k_tok = TOK;
  static constexpr int k_bw = BW;
  static constexpr int k_stages_value = STAGES;
  static constexpr int k_n = N;
  static constexpr bool k_fp8 = FP8;
};

// The stage memory (1024-byte aligned) and the barriers of both schedules; the caller syncs the
// CTA before the barriers are used.
template <class G>
__device__ __forceinline__ void moe_pipeline_init(unsigned char* smem, unsigned long long* bars,
                                                  MoeWgmmaBlock& b) {
  b.tiles = (shared_address(smem) + 1023) & ~1023u;
  b.tiles_generic = smem + (b.tiles - shared_address(smem));
  b.full_bar = shared_address(bars);
  b.empty_bar = b.full_bar + 8 * G::k_stages_value;
  if (threadIdx.x == 0) {
    for (int s = 0; s < G::k_stages_value; ++s) {
      mbarrier_init(b.full_bar + 8 * s, G::k_full_arrivals);
      mbarrier_init(b.empty_bar + 8 * s, G::k_empty_arrivals);
    }
    mbarrier_init_fence();
  }
}

// Shared setup: early exit past the padded count, the block's A rows and slots, the barriers.
// Returns false when the block has no work.
template <class G>
__device__ __forceinline__ bool
moe_wgmma_setup(const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
                int num_slots, int a_row_divisor, int group_blocks, unsigned char* smem,
                unsigned long long* bars, int* a_rows, int* slot_of_row, MoeWgmmaBlock& b) {
  // Grouped rasterization over a 1-D grid: CTAs in launch order take group_blocks consecutive
  // token blocks for one weight tile, then the next tile. With many blocks an expert (8), the
  // CTAs in flight share weight tiles through L2 instead of each re-reading them from HBM; with
  // about one (1: block-major), there is nothing to share, and each block is complete early, so
  // GEMM2 (with the hand-off) can take it while GEMM1 still runs (moe_detail::group_blocks).
  constexpr int k_tiles = G::k_n / G::k_out_cols / G::k_tiles_per_cta; // tile groups
  // The SPLITK CTAs of a cluster (consecutive in x) share the block and tile.
  const int id = static_cast<int>(blockIdx.x) / G::k_split_k;
  b.k_tile0 = static_cast<int>(blockIdx.x) % G::k_split_k * G::k_k_tiles;
  const int in_group = id % (group_blocks * k_tiles);
  const int m_block = id / (group_blocks * k_tiles) * group_blocks + in_group % group_blocks;
  b.tile = in_group / group_blocks * G::k_tiles_per_cta; // the first of the CTA's tiles
  if (m_block * G::k_tok >= moe_ldg(num_post_padded))
    return false;
  b.m_block = m_block;
  b.expert = moe_ldg(expert_ids + m_block);
  moe_pipeline_init<G>(smem, bars, b);
  moe_block_rows<G::k_tok>(sorted_ids, m_block, num_slots, a_row_divisor, a_rows, slot_of_row);
  __syncthreads();
  b.slot_of_row = slot_of_row;
  // Swap-AB narrows its MMAs to the used rows (moe_with_width); the normal orientation's
  // warpgroups check their own rows (moe_rows_all_padding).
  b.used_rows = G::k_swap ? moe_used_rows<G::k_tok>(slot_of_row) : G::k_tok;
  return true;
}

} // namespace specjit_kernels
