// After a wgmma GEMM's K loop: the partial sums of a tile whose K was split, across the
// warpgroups of a CTA, the CTAs of a cluster, or (stream-K) the CTAs of the grid, added in order.
#pragma once

#include "moe/wgmma_persistent.cuh"
#include "moe/wgmma_stages.cuh"

namespace specjit_kernels {

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

// Packed swap-AB GEMM1 (32 gate rows over 32 up rows): warps 2-3 hold the up values of the
// columns warps 0-1 hold the gate values of; they hand them over through the idle stage memory
// (past the K-split partial sums). Afterwards only warps 0-1 have outputs.
template <class G>
__device__ __forceinline__ void moe_wgmma_pair_up(const MoeWgmmaBlock& b,
                                                  const float (&acc)[G::k_halves][G::k_acc]) {
  if constexpr (G::k_packed) {
    static_assert((G::k_acc * 128 + 32 * G::k_tok) * 4 <= G::k_stages_value * G::k_stage_bytes,
                  "partial sums and up values fit in the stage memory");
    const int warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    float* up = reinterpret_cast<float*>(b.tiles_generic) + G::k_acc * 128;
    if (warp >= 2) {
#pragma unroll
      for (int j = 0; j < G::k_mma_n / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int column = 16 * (warp - 2) + (lane >> 2) + 8 * (e >> 1);
          up[column * G::k_tok + 8 * j + 2 * (lane & 3) + (e & 1)] = acc[0][4 * j + e];
        }
    }
    named_barrier(4, 128);
  }
}

} // namespace specjit_kernels
