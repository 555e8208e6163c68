// Grouping of the token x top_k slots by expert (the moe_align_block_size step; contract in
// runtime/ops/moe_align.h). One CTA of 1024 threads:
//   1. counts per expert with shared-memory atomics (ids outside [0, EXPERTS) are dropped);
//   2. each expert's count padded to BLOCK_M, exclusive prefix sum (one thread per expert,
//      warp scans), the padded total written to num_tokens_post_padded;
//   3. sorted_token_ids[0, total) filled with the sentinel num_slots, expert_ids per block;
//   4. every slot scattered to its expert's next position (shared atomic cursor);
//   5. the counter_count ints at `counters` zeroed (the persistent GEMM schedules' counters,
//      which they leave zero again; none: counter_count 0).
// The order of slots inside an expert's segment is unspecified (atomics); the GEMMs compute
// every row independently, so results do not depend on it. The slots always come first in their
// segment, the padding after them (the cursor starts at the segment's first row): the wgmma
// GEMMs skip a warpgroup whose first row is padding.
#include "common/spec.cuh"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

namespace moe_align_detail {
inline constexpr int k_threads = 1024;
} // namespace moe_align_detail

template <int EXPERTS, int BLOCK_M, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(moe_align_detail::k_threads)
    moe_align(const int* __restrict__ topk_ids, int* __restrict__ sorted_token_ids,
              int* __restrict__ expert_ids, int* __restrict__ num_tokens_post_padded,
              int* __restrict__ counters, int counter_count, int num_tokens, int top_k) {
  using namespace moe_align_detail;
  static_assert(EXPERTS >= 1 && EXPERTS <= k_threads, "one thread per expert in the scan");
  __shared__ int counts[EXPERTS];
  __shared__ int cursor[EXPERTS];
  __shared__ int warp_totals[32];
  __shared__ int total_padded;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;

  for (int e = tid; e < EXPERTS; e += k_threads)
    counts[e] = 0;
  __syncthreads();
  for (int s = tid; s < slots; s += k_threads) {
    const int e = topk_ids[s];
    if (e >= 0 && e < EXPERTS)
      shared_fetch_add(&counts[e], 1);
  }
  __syncthreads();

  const int padded = tid < EXPERTS ? (counts[tid] + BLOCK_M - 1) / BLOCK_M * BLOCK_M : 0;
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
    cursor[tid] = exclusive;
    for (int b = exclusive / BLOCK_M; b < (exclusive + padded) / BLOCK_M; ++b)
      expert_ids[b] = tid;
  }
  const int total = total_padded;
  for (int i = tid; i < total; i += k_threads)
    sorted_token_ids[i] = slots;
  __syncthreads(); // the sentinel fill is visible before any slot overwrites it

  for (int s = tid; s < slots; s += k_threads) {
    const int e = topk_ids[s];
    if (e >= 0 && e < EXPERTS)
      sorted_token_ids[shared_fetch_add(&cursor[e], 1)] = s;
  }
  for (int i = tid; i < counter_count; i += k_threads)
    counters[i] = 0;
}

} // namespace specjit_kernels
