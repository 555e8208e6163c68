// The schedules of the wgmma MoE GEMMs (moe/gemm_wgmma.cu): the warps' roles, and a CTA's work
// under the fixed, stream-K and dynamic schedules, each calling the GEMM's epilogue per tile.
#pragma once

#include "moe/wgmma_consume.cuh"
#include "moe/wgmma_produce.cuh"
#include "moe/wgmma_reduce.cuh"

namespace specjit_kernels {

// The warps' roles once the pipeline is set up, in every schedule. A producer-warpgroup thread
// gives its registers to the consumers (MoeWgmma::k_producer_regs) and then loads, unless its
// warp is one that loads nothing (k_producer_warps launched for setmaxnreg's whole warpgroup,
// k_producers loading): false, it leaves. A consumer thread takes the registers past the
// producers' branch (there ptxas allocates the consumers' code for them; a claim before the
// branch made the f16-token GEMM1 spill 676 bytes).
template <class G> __device__ __forceinline__ bool moe_producer_starts() {
  if constexpr (G::k_producer_regs != 0)
    warpgroup_release_registers<G::k_producer_regs>();
  return static_cast<int>(threadIdx.x) < G::k_consumers + G::k_producers;
}
template <class G> __device__ __forceinline__ void moe_consumer_starts() {
  if constexpr (G::k_consumer_regs != 0)
    warpgroup_claim_registers<G::k_consumer_regs>();
}

// The CTA's work, shared by GEMM1 and GEMM2: for each of its tiles the K loop, the reductions
// (K split across warpgroups and across the cluster) and then epilogue(b, acc) with b.tile set,
// by the threads that hold the tile's sums. `d` (GEMM2): its tokens are the previous kernel's
// output (MoeDependence).
template <class G, class Epilogue>
__device__ __forceinline__ void
moe_wgmma_main(const MoeWeights& w_map, const unsigned char* a, const TmaDesc* a_map,
               const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
               int num_slots, int a_row_divisor, int w_row_half, int group_blocks,
               const MoeDependence& d, Epilogue&& epilogue) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * G::k_stages_value];
  __shared__ int a_rows[G::k_tok];
  __shared__ int slot_of_row[G::k_tok];
  MoeWgmmaBlock b;
  if (!moe_wgmma_setup<G>(sorted_ids, expert_ids, num_post_padded, num_slots, a_row_divisor,
                          group_blocks, smem, bars, a_rows, slot_of_row, b))
    return;
  if (!d.depends) // GEMM1: GEMM2 may start now and stream its weights while this grid ends
    grid_launch_dependents();
  if (static_cast<int>(threadIdx.x) >= G::k_consumers) {
    if (!moe_producer_starts<G>())
      return;
    // One producer warp per CTA of a token block in use.
    const int blocks = moe_ldg(num_post_padded) / G::k_tok;
    const MoeDependence dep = moe_producer_dependence<G>(
        d, num_post_padded, blocks * (G::k_n / G::k_out_cols / G::k_tiles_per_cta) * G::k_split_k);
    moe_wgmma_produce<G>(b, w_map, a, a_map, a_rows, w_row_half, dep);
    return;
  }
  moe_consumer_starts<G>();
  const int first_tile = b.tile;
#pragma unroll 1
  for (int t = 0; t < G::k_tiles_per_cta; ++t) {
    b.tile = first_tile + t;
    float acc[G::k_halves][G::k_acc];
    moe_wgmma_consume<G>(b, t * G::k_k_tiles, 0, G::k_k_tiles, acc);
    if (!moe_wgmma_reduce<G>(b, acc) || !moe_wgmma_split_reduce<G>(b, acc))
      return;
    moe_wgmma_pair_up<G>(b, acc);
    epilogue(b, acc);
  }
}

// A token block's slots and expert in the consumers' registers, each thread its rows of
// slot_of_row: loaded ahead of the tile that needs them (moe_wgmma_dynamic: during the previous
// tile's epilogue, so the loads' latency is off the tensor cores' path).
template <class G> struct MoeBlockIndices {
  static constexpr int k_rows = (G::k_tok + G::k_consumers - 1) / G::k_consumers; // a thread's
  int m_block = -1, expert = 0;
  int slot[k_rows]; // the sorted entries as read; slot_of_row takes them as slots or padding
  __device__ __forceinline__ void load(int block, const int* sorted_ids, const int* expert_ids) {
    m_block = block;
    expert = moe_ldg(expert_ids + block);
#pragma unroll
    for (int i = 0; i < k_rows; ++i) {
      const int r = static_cast<int>(threadIdx.x) + i * G::k_consumers;
      slot[i] = r < G::k_tok ? moe_ldg(sorted_ids + block * G::k_tok + r) : -1;
    }
  }
};

// The persistent schedules' consumers, when their next tile is of another token block than the
// last (b.m_block): its slots (slot_of_row, the consumers' own copy, TOK rows), expert and used
// rows, from `held` (loaded here unless it holds m_block already); named barrier 5 is theirs.
template <class G>
__device__ __forceinline__ void
moe_consumers_take_block(MoeWgmmaBlock& b, int m_block, MoeBlockIndices<G>& held,
                         const int* sorted_ids, const int* expert_ids, int num_slots,
                         int* slot_of_row) {
  if (m_block == b.m_block)
    return;
  if (held.m_block != m_block)
    held.load(m_block, sorted_ids, expert_ids);
  named_barrier(5, G::k_consumers); // the last tile's epilogue is done with slot_of_row
#pragma unroll
  for (int i = 0; i < MoeBlockIndices<G>::k_rows; ++i) {
    const int r = static_cast<int>(threadIdx.x) + i * G::k_consumers;
    if (r < G::k_tok)
      slot_of_row[r] = moe_slot_or_padding(held.slot[i], num_slots);
  }
  named_barrier(5, G::k_consumers);
  b.m_block = m_block;
  b.expert = held.expert;
  b.slot_of_row = slot_of_row;
  // As moe_wgmma_setup: swap-AB narrows its MMAs to the used rows, the normal orientation's
  // warpgroups check their own (moe_rows_all_padding).
  b.used_rows = G::k_swap ? moe_used_rows<G::k_tok>(b.slot_of_row) : G::k_tok;
}

// Stream-K (SCHEDULE stream_k): the CTA's steps [begin, end) (moe_stream_k_setup), tile by tile. A
// tile split between CTAs is completed and written by the CTA whose piece arrives last
// (moe_stream_k_meet). The consumers recompute the block's slots when the token block changes.
template <class G, class Epilogue>
__device__ __forceinline__ void
moe_wgmma_stream_k(const MoeWeights& w_map, const unsigned char* a, const TmaDesc* a_map,
                   const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
                   int num_slots, int a_row_divisor, int w_row_half, const MoeDependence& d,
                   unsigned char* scratch, Epilogue&& epilogue) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * G::k_stages_value];
  __shared__ int a_rows[G::k_tok];      // the producer's
  __shared__ int slot_of_row[G::k_tok]; // the consumers'
  MoeWgmmaBlock b;
  MoeStreamK sk;
  long long begin, end;
  if (!moe_stream_k_setup<G>(num_post_padded, smem, bars, b, sk, begin, end))
    return;
  if (!d.depends) // GEMM1: GEMM2 may start now and stream its weights while this grid ends
    grid_launch_dependents();
  if (static_cast<int>(threadIdx.x) >= G::k_consumers) {
    // One producer warp per CTA with steps.
    const MoeDependence dep = moe_producer_dependence<G>(
        d, num_post_padded, static_cast<int>(sk.total < sk.ctas ? sk.total : sk.ctas));
    moe_stream_k_produce<G>(b, begin, end, w_map, a, a_map, a_rows, sorted_ids, expert_ids,
                            num_slots, a_row_divisor, w_row_half, dep);
    return;
  }
  const int cta = static_cast<int>(blockIdx.x);
  b.m_block = -1;
  MoeBlockIndices<G> held;
#pragma unroll 1
  for (long long u = begin; u < end;) {
    const MoeStreamStep<G> st(u);
    const int k1 =
        static_cast<int>(G::k_k_tiles - st.k < end - u ? G::k_k_tiles : st.k + (end - u));
    moe_consumers_take_block<G>(b, st.m_block, held, sorted_ids, expert_ids, num_slots,
                                slot_of_row);
    b.tile = st.tile;
    float acc[G::k_halves][G::k_acc];
    moe_wgmma_consume<G>(b, static_cast<int>(u - begin) - st.k, st.k, k1, acc);
    // A tile split between CTAs is written by the CTA whose piece arrives last.
    const bool whole = st.k == 0 && k1 == G::k_k_tiles;
    if (whole || moe_stream_k_meet<G>(scratch, sk, cta, u - st.k, acc))
      epilogue(b, acc);
    u += k1 - st.k;
  }
}

// Dynamic (SCHEDULE dynamic): a resident grid whose CTAs take whole tiles from a global
// counter (moe_dynamic_produce), in moe_dynamic_item's order; the consumers learn each tile from
// the producers' ring once its first stage has landed, and stop at index -1. Each CTA streams
// weights across its tiles without a new CTA's pipeline fill (the producers fill the next tile's
// stages during a tile's epilogue), and the SMs served faster take more tiles. Swap-AB (the
// f16-token GEMM1 with two warpgroups and four producer warps too) and the normal orientation.
template <class G, class Epilogue>
__device__ __forceinline__ void
moe_wgmma_dynamic(const MoeWeights& w_map, const unsigned char* a, const TmaDesc* a_map,
                  const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
                  int num_slots, int a_row_divisor, int w_row_half, int group_blocks,
                  const MoeDependence& d, unsigned char* scratch, Epilogue&& epilogue) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * G::k_stages_value];
  __shared__ int a_rows[G::k_tok];      // the producers'
  __shared__ int slot_of_row[G::k_tok]; // the consumers'
  __shared__ int ring[k_dynamic_ring];
  MoeWgmmaBlock b;
  b.k_tile0 = 0;
  moe_pipeline_init<G>(smem, bars, b);
  if (threadIdx.x < k_dynamic_ring) // no entry: the consumers read ahead of the producers
    ring[threadIdx.x] = -1;
  __syncthreads();
  const int blocks = moe_ldg(num_post_padded) / G::k_tok;
  const int group = moe_dynamic_group<G>(group_blocks);
  if (!d.depends) // GEMM1: GEMM2 may start now and stream its weights while this grid ends
    grid_launch_dependents();
  if (static_cast<int>(threadIdx.x) >= G::k_consumers) {
    if (!moe_producer_starts<G>())
      return;
    int* counters = reinterpret_cast<int*>(scratch) + k_dynamic_counters + (d.depends ? 2 : 0);
    const MoeDependence dep =
        moe_producer_dependence<G>(d, num_post_padded, static_cast<int>(gridDim.x));
    moe_dynamic_produce<G>(b, counters, blocks, group, ring, w_map, a, a_map, a_rows, sorted_ids,
                           expert_ids, num_slots, a_row_divisor, w_row_half, dep);
    return;
  }
  moe_consumer_starts<G>();
  b.m_block = -1;
  MoeBlockIndices<G> held;
  const volatile int* published = ring;
#pragma unroll 1
  for (int t = 0, kt = 0;; ++t, kt += G::k_k_tiles) {
    mbarrier_wait(b.full_bar + 8 * (kt % G::k_stages_value), (kt / G::k_stages_value) & 1);
    const int item = published[t % k_dynamic_ring];
    if (item < 0)
      break;
    const MoeDynamicItem it = moe_dynamic_item<G>(item, blocks, group);
    moe_consumers_take_block<G>(b, it.m_block, held, sorted_ids, expert_ids, num_slots,
                                slot_of_row);
    b.tile = it.tile;
    float acc[G::k_halves][G::k_acc];
    moe_wgmma_consume<G>(b, kt, 0, G::k_k_tiles, acc);
    // The next tile's block, if the producers have taken it (they run stages ahead): its indices
    // load while this tile's epilogue runs. The entry read here may still be -1 or an earlier
    // tile's (of this launch: the ring starts at -1); `held` names the block it loaded, and
    // take_block loads again if that is not the tile's.
    const int next = published[(t + 1) % k_dynamic_ring];
    if (next >= 0) {
      const int next_block = moe_dynamic_item<G>(next, blocks, group).m_block;
      if (next_block != held.m_block)
        held.load(next_block, sorted_ids, expert_ids);
    }
    epilogue(b, acc);
  }
}

// The CTA's schedule: fixed, stream-K or dynamic.
template <class G, class Epilogue>
__device__ __forceinline__ void
moe_wgmma_run(const MoeWeights& w_map, const unsigned char* a, const TmaDesc* a_map,
              const int* sorted_ids, const int* expert_ids, const int* num_post_padded,
              int num_slots, int a_row_divisor, int w_row_half, int group_blocks,
              const MoeDependence& d, unsigned char* scratch, Epilogue&& epilogue) {
  if constexpr (G::k_stream_k)
    moe_wgmma_stream_k<G>(w_map, a, a_map, sorted_ids, expert_ids, num_post_padded, num_slots,
                          a_row_divisor, w_row_half, d, scratch, epilogue);
  else if constexpr (G::k_dynamic)
    moe_wgmma_dynamic<G>(w_map, a, a_map, sorted_ids, expert_ids, num_post_padded, num_slots,
                         a_row_divisor, w_row_half, group_blocks, d, scratch, epilogue);
  else
    moe_wgmma_main<G>(w_map, a, a_map, sorted_ids, expert_ids, num_post_padded, num_slots,
                      a_row_divisor, w_row_half, group_blocks, d, epilogue);
}

} // namespace specjit_kernels
