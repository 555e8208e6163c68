// The producers of the persistent schedules of the wgmma MoE GEMMs (moe/wgmma_produce.cuh has
// the fixed schedule's and the loads they share): stream-K's shares of the steps, and the dynamic
// schedule's tiles taken from a counter.
#pragma once

#include "moe/dynamic_order.h"
#include "moe/wgmma_produce.cuh"

namespace specjit_kernels {

// Stream-K: the CTAs' shares of `total` steps (token blocks x tiles x K stages, in that order
// of significance, so a CTA's consecutive tiles share their token block): CTA c takes steps
// begin(c) .. begin(c + 1) - 1.
struct MoeStreamK {
  long long total;
  int ctas;
  __device__ __forceinline__ long long begin(int cta) const { return cta * total / ctas; }
  // The CTA whose steps include step u: the last c with begin(c) <= u.
  __device__ __forceinline__ int cta_of(long long u) const {
    return static_cast<int>(((u + 1) * ctas - 1) / total);
  }
};
// One step of the stream: token block, tile, and K stage (of k_k_tiles) of step u.
template <class G> struct MoeStreamStep {
  int m_block, tile, k;
  __device__ __forceinline__ explicit MoeStreamStep(long long u) {
    constexpr int k_tiles = G::k_n / G::k_out_cols;
    const long long item = u / G::k_k_tiles;
    k = static_cast<int>(u % G::k_k_tiles);
    m_block = static_cast<int>(item / k_tiles);
    tile = static_cast<int>(item % k_tiles);
  }
};

// Stream-K setup: the CTA's steps [begin, end) and its barriers. Returns false when it has none
// (fewer steps than CTAs).
template <class G>
__device__ __forceinline__ bool
moe_stream_k_setup(const int* num_post_padded, unsigned char* smem, unsigned long long* bars,
                   MoeWgmmaBlock& b, MoeStreamK& sk, long long& begin, long long& end) {
  sk.total = static_cast<long long>(moe_ldg(num_post_padded) / G::k_tok) *
             (G::k_n / G::k_out_cols) * G::k_k_tiles;
  sk.ctas = static_cast<int>(gridDim.x);
  begin = sk.begin(static_cast<int>(blockIdx.x));
  end = sk.begin(static_cast<int>(blockIdx.x) + 1);
  if (begin >= end)
    return false;
  b.k_tile0 = 0;
  moe_pipeline_init<G>(smem, bars, b);
  __syncthreads();
  return true;
}

// The loading producer warps meet (the normal orientation's GEMM1 and the f16-token GEMM1 in
// token order have four; named barrier 8 is theirs).
template <class G> __device__ __forceinline__ void moe_producers_sync() {
  if constexpr (G::k_producers == 32)
    __syncwarp();
  else
    named_barrier(8, G::k_producers);
}

// The persistent schedules' producer warps, when their next tile is of another token block than
// the last (`rows_of`): GEMM1's gathered rows of block m_block (a_rows, only theirs, TOK rows).
template <class G>
__device__ __forceinline__ void moe_producer_take_block(int m_block, int& rows_of,
                                                        const int* sorted_ids, int num_slots,
                                                        int a_row_divisor, int* a_rows) {
  if constexpr (!G::k_a_tma) {
    if (m_block == rows_of)
      return;
    moe_producers_sync<G>(); // the previous block's copies are all issued
    moe_block_rows_by<G::k_tok>(sorted_ids, m_block, num_slots, a_row_divisor, a_rows, nullptr,
                                static_cast<int>(threadIdx.x) - G::k_consumers, G::k_producers);
    moe_producers_sync<G>();
    rows_of = m_block;
  }
}

// The dynamic schedule's item `item` (moe/dynamic_order.h) in groups of `group` blocks
// (moe_dynamic_group). Block-major, a prefill GEMM1 with over 100 tiles a block would stream its
// expert's weights from HBM once for every block.
template <class G>
__device__ __forceinline__ MoeDynamicItem moe_dynamic_item(int item, int blocks, int group) {
  return moe_dynamic_item(item, blocks, group, G::k_n / G::k_out_cols);
}
// The group size the dynamic schedule runs with: 1 (block-major) for swap-AB, else the launch's
// group_blocks.
template <class G> __device__ __forceinline__ int moe_dynamic_group(int group_blocks) {
  return G::k_swap_ab || group_blocks < 1 ? 1 : group_blocks;
}

// The stream-K producer warp: the steps [begin, end), each token block's rows recomputed when
// the block changes (GEMM1: a_rows, which only this warp reads). `d` as in moe_wgmma_produce.
template <class G>
__device__ __forceinline__ void
moe_stream_k_produce(const MoeWgmmaBlock& b, long long begin, long long end,
                     const MoeWeights& w_map, const unsigned char* a, const TmaDesc* a_map,
                     int* a_rows, const int* sorted_ids, const int* expert_ids, int num_slots,
                     int a_row_divisor, int w_row_half, const MoeDependence& d) {
  static_assert(G::k_producers == 32, "one producer warp");
  auto load_weights = [&](long long u) {
    const MoeStreamStep<G> st(u);
    moe_load_weights<G>(b, w_map, static_cast<int>(u - begin), st.k * 128, st.tile * G::k_out_cols,
                        moe_ldg(expert_ids + st.m_block), w_row_half);
  };
  const long long prefetched =
      d.depends ? (end - begin < G::k_stages_value ? end - begin : G::k_stages_value) : 0;
#pragma unroll 1
  for (long long u = begin; u < begin + prefetched; ++u)
    load_weights(u);
  int rows_of = -1, ready = -1; // the token block a_rows holds, the last one waited for
#pragma unroll 1
  for (long long u = begin; u < end; ++u) {
    if (u >= begin + prefetched)
      load_weights(u);
    const MoeStreamStep<G> st(u);
    moe_producer_take_block<G>(st.m_block, rows_of, sorted_ids, num_slots, a_row_divisor, a_rows);
    moe_wait_rows(d, st.m_block, ready);
    moe_load_tokens<G>(b, a, a_map, a_rows, static_cast<int>(u - begin), st.k * 128, st.m_block);
  }
  cp_async_wait<0>(); // no copy outlives its thread
  moe_dependence_end(d);
}

// The dynamic schedule: tiles (token block, tile; in moe_dynamic_item's order) handed out one at
// a time from a global counter, so CTAs that get more memory service take more tiles. The first
// producer thread takes the next tile when the producers start loading it and publishes its index
// in a ring of k_dynamic_ring entries, where the other producer threads read it too (the consumers
// read it once the tile's first stage has landed: it is written before that thread's arrival
// on the stage's `full` barrier). With no tile left the producers complete the next stage's
// `full` phase without data under index -1, which ends the consumers. The last CTA done resets
// both counters for the next launch (moe_align zeroes them first).

template <class G>
__device__ __forceinline__ void
moe_dynamic_produce(const MoeWgmmaBlock& b, int* counters, int blocks, int group,
                    volatile int* ring, const MoeWeights& w_map, const unsigned char* a,
                    const TmaDesc* a_map, int* a_rows, const int* sorted_ids, const int* expert_ids,
                    int num_slots, int a_row_divisor, int w_row_half, const MoeDependence& d) {
  constexpr int k_tiles = G::k_n / G::k_out_cols;
  const int items = blocks * k_tiles;
  const int producer = static_cast<int>(threadIdx.x) - G::k_consumers;
  int kt = 0, rows_of = -1, ready = -1;
#pragma unroll 1
  for (int t = 0;; ++t) {
    if (producer == 0) {
      const int next = atomicAdd(counters, 1);
      ring[t % k_dynamic_ring] = next < items ? next : -1;
    }
    moe_producers_sync<G>();
    const int item = ring[t % k_dynamic_ring];
    if (item < 0) { // no tile left: complete step kt's phase with no data
      const int s = kt % G::k_stages_value;
      mbarrier_wait(b.empty_bar + 8 * s, ((kt / G::k_stages_value) & 1) ^ 1);
      const unsigned full = b.full_bar + 8 * s;
      if constexpr (G::k_a_tma) {
        if (producer == 0)
          mbarrier_arrive(full);
      } else {
        mbarrier_arrive(full); // every producer thread's cp.async arrival
        if (producer == 0)
          mbarrier_arrive(full); // and the weights' arrive_expect_tx
      }
      break;
    }
    const MoeDynamicItem it = moe_dynamic_item<G>(item, blocks, group);
    const int expert = moe_ldg(expert_ids + it.m_block);
    moe_producer_take_block<G>(it.m_block, rows_of, sorted_ids, num_slots, a_row_divisor, a_rows);
#pragma unroll 1
    for (int k = 0; k < G::k_k_tiles; ++k, ++kt) {
      moe_load_weights<G>(b, w_map, kt, k * 128, it.tile * G::k_out_cols, expert, w_row_half);
      moe_wait_rows(d, it.m_block, ready); // GEMM2: once a block, the stage's weights requested
      moe_load_tokens<G>(b, a, a_map, a_rows, kt, k * 128, it.m_block);
    }
  }
  cp_async_wait<0>(); // no copy outlives its thread
  moe_dependence_end(d);
  if (producer == 0 && atomicAdd(counters + 1, 1) == static_cast<int>(gridDim.x) - 1) {
    counters[0] = 0; // every CTA has taken its last index: ready for the next launch
    counters[1] = 0;
  }
}

} // namespace specjit_kernels
