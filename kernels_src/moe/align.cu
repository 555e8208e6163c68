// Grouping of the token x top_k slots by expert (the moe_align_block_size step; contract in
// ops/moe/fused_moe.h, moe_align). One CTA of 1024 threads:
//   1. counts per expert with shared-memory atomics (ids outside [0, EXPERTS) are dropped), per
//      chunk of consecutive slots when STABLE (k_ways chunks, one a warp in step 4);
//   2. per expert (one thread each): the chunks' counts turned into offsets, the total padded to
//      BLOCK_M, exclusive prefix sum over the experts (warp scans), the padded total written to
//      num_tokens_post_padded, expert_ids per block;
//   3. sorted_token_ids[0, total) filled with the sentinel num_slots;
//   4. every slot placed in its expert's segment: STABLE, each warp its chunk's slots, 32 at a
//      time in order, at its expert's offset for the chunk plus the slot's rank among the 32
//      with the same expert (match.any); otherwise at a shared atomic cursor per expert;
//   5. the counter_count ints at `counters` zeroed (the persistent GEMM schedules' counters,
//      which they leave zero again; none: counter_count 0).
// Each segment holds its expert's slots, then its padding (the wgmma GEMMs skip a warpgroup
// whose first row is padding). STABLE, the slots are in increasing order, the same from call to
// call; otherwise in the order the threads happened to arrive. The GEMMs compute every row
// alone, so no result depends on that order but stream-K's: its tiles are split between CTAs at
// K stages that depend on the token block a row falls in, and its sums' last bits with them.
// STABLE costs about 1 us at decode and 10 us at 32768 slots (one H200), so the host asks for
// it with stream-K GEMMs only.
#include "common/spec.cuh"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

namespace moe_align_detail {
inline constexpr int k_threads = 1024;
} // namespace moe_align_detail

template <int EXPERTS, int BLOCK_M, int STABLE, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(moe_align_detail::k_threads)
    moe_align(const int* __restrict__ topk_ids, int* __restrict__ sorted_token_ids,
              int* __restrict__ expert_ids, int* __restrict__ num_tokens_post_padded,
              int* __restrict__ counters, int counter_count, int num_tokens, int top_k) {
  using namespace moe_align_detail;
  static_assert(EXPERTS >= 1 && EXPERTS <= k_threads, "one thread per expert in the scan");
  // Chunks: as many as 32 KB of per-chunk counters allow (one a warp in step 4) when STABLE.
  constexpr int k_ways = !STABLE ? 1 : EXPERTS <= 256 ? 32 : (EXPERTS <= 512 ? 16 : 8);
  __shared__ int offsets[k_ways][EXPERTS]; // counts per chunk, then each chunk's next position
  __shared__ int warp_totals[32];
  __shared__ int total_padded;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  const int chunk = (slots + k_ways - 1) / k_ways;

  for (int i = tid; i < k_ways * EXPERTS; i += k_threads)
    (&offsets[0][0])[i] = 0;
  __syncthreads();
  for (int s = tid; s < slots; s += k_threads) {
    const int e = topk_ids[s];
    if (e >= 0 && e < EXPERTS)
      shared_fetch_add(&offsets[STABLE ? s / chunk : 0][e], 1);
  }
  __syncthreads();

  int count = 0; // this thread's expert's slots; its chunks' counts become offsets from 0
  if (tid < EXPERTS)
    for (int w = 0; w < k_ways; ++w) {
      const int c = offsets[w][tid];
      offsets[w][tid] = count;
      count += c;
    }
  const int padded = tid < EXPERTS ? (count + BLOCK_M - 1) / BLOCK_M * BLOCK_M : 0;
  int inclusive = padded;
#pragma unroll
  for (int delta = 1; delta < 32; delta <<= 1) {
    const int other = shfl_up_i32(inclusive, delta);
    if (lane >= delta)
      inclusive += other;
  }
  if (lane == 31)
    warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int total = warp_totals[lane];
    int scan = total;
#pragma unroll
    for (int delta = 1; delta < 32; delta <<= 1) {
      const int other = shfl_up_i32(scan, delta);
      if (lane >= delta)
        scan += other;
    }
    warp_totals[lane] = scan - total; // exclusive prefix of the warps
    if (lane == 31) {
      total_padded = scan;
      *num_tokens_post_padded = scan;
    }
  }
  __syncthreads();
  const int exclusive = inclusive - padded + warp_totals[warp];
  if (tid < EXPERTS) {
    for (int w = 0; w < k_ways; ++w)
      offsets[w][tid] += exclusive;
    for (int b = exclusive / BLOCK_M; b < (exclusive + padded) / BLOCK_M; ++b)
      expert_ids[b] = tid;
  }
  const int total = total_padded;
  for (int i = tid; i < total; i += k_threads)
    sorted_token_ids[i] = slots;
  __syncthreads(); // the sentinel fill and the offsets are visible before any slot is placed

  if constexpr (!STABLE) {
    for (int s = tid; s < slots; s += k_threads) {
      const int e = topk_ids[s];
      if (e >= 0 && e < EXPERTS)
        sorted_token_ids[shared_fetch_add(&offsets[0][e], 1)] = s;
    }
  } else if (warp < k_ways) {
    const int end = slots < (warp + 1) * chunk ? slots : (warp + 1) * chunk;
    // k_batch rounds' ids are loaded at once, so that their latencies overlap.
    constexpr int k_batch = 8;
#pragma unroll 1
    for (int base = warp * chunk; base < end; base += 32 * k_batch) {
      int ids[k_batch];
#pragma unroll
      for (int j = 0; j < k_batch; ++j) {
        const int s = base + 32 * j + lane;
        ids[j] = s < end ? topk_ids[s] : -1;
      }
#pragma unroll
      for (int j = 0; j < k_batch; ++j) {
        const int e = ids[j] >= 0 && ids[j] < EXPERTS ? ids[j] : -1;
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        const int rank = __popc(peers & ((1u << lane) - 1));
        const int position = e >= 0 ? offsets[warp][e] + rank : 0;
        __syncwarp(); // every lane has read its offset before the first of its peers moves it
        if (e >= 0) {
          if (rank == 0)
            offsets[warp][e] += __popc(peers);
          sorted_token_ids[position] = base + 32 * j + lane;
        }
        __syncwarp();
      }
    }
  }
  for (int i = tid; i < counter_count; i += k_threads)
    counters[i] = 0;
}

} // namespace specjit_kernels
