// Hopper (sm_90a) building blocks of warp-group GEMMs, without any CUDA header: shared-memory
// matrix descriptors, wgmma fences and groups, mbarriers and TMA tile loads.
//
// Tiles handled here are K-major rows of 128 bytes with the 128-byte swizzle (16-byte chunk c
// of row r stored at chunk c ^ (r % 8)), the layout TMA's SWIZZLE_128B writes; every tile
// starts at a 1024-byte boundary so the swizzle phase is the row index itself.
#pragma once

#include "common/mma.cuh"
#include "common/tma_desc.h"
#include "common/wgmma_ops.cuh"

namespace specjit_kernels {

// wgmma descriptor of a K-major, 128-byte-swizzled tile at shared address `tile`: 8-row groups
// 1024 bytes apart (stride byte offset), leading byte offset unused by this layout (1 by
// convention). Advancing K by 32 bytes inside the 128-byte row adds 2 to the descriptor.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(unsigned tile) {
  return static_cast<unsigned long long>((tile & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across wgmma fences: the first
// REGS of d (an MMA narrower than the accumulator array writes fewer).
template <int REGS, int COUNT> __device__ __forceinline__ void fence_registers(float (&d)[COUNT]) {
  static_assert(REGS <= COUNT, "a prefix of the array");
#pragma unroll
  for (int i = 0; i < REGS; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

// Ordinary shared-memory writes (cp.async included) made visible to the async proxy (wgmma,
// TMA) of the CTA; each writing thread fences before it signals.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_init(unsigned bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrives on the barrier once every cp.async this thread issued before has landed in shared
// memory (the arrival is one of the barrier's expected count: .noinc). The thread goes on at
// once; a consumer that hands the bytes to the async proxy (wgmma) fences after its wait.
__device__ __forceinline__ void cp_async_mbarrier_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Adds `bytes` to the transaction count of the barrier's current phase without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\n"
               "wait_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait_%=;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}

// One TMA tile load of a rank-3 tensor map (coordinates innermost first) into shared memory,
// completing `bar`'s transaction count.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaDesc* map, unsigned bar, int c0,
                                            int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}

// The same for a rank-4 tensor map.
__device__ __forceinline__ void tma_load_4d(unsigned dst, const TmaDesc* map, unsigned bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}

// One bulk copy of `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned)
// from global into shared memory, completing `bar`'s transaction count. No tensor map, no swizzle.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Barrier among `threads` threads (a multiple of 32) of the CTA, id 1..15 (0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Four e4m3 (one 32-bit word, lowest byte first) -> four f16, exactly (every e4m3 value is an
// f16 value), as two f16x2 words.
__device__ __forceinline__ void e4m3x4_to_f16x4(unsigned word, unsigned& low, unsigned& high) {
  asm("{\n.reg .b16 lo, hi;\n"
      "mov.b32 {lo, hi}, %2;\n"
      "cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      "cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(low), "=r"(high)
      : "r"(word));
}

// Sixteen e4m3 values (k = 0..15 of a 16-byte chunk) -> their sixteen f16 values, exactly, in
// the k order of wgmma's f16 register-A fragments built from an e4m3 ldmatrix (moe_load_a_f16 in
// moe/wgmma_consume_f16.cuh): `first` holds k 0,1,4,5,8,9,12,13 and `second` k 2,3,6,7,10,11,14,15.
// The other operand of those MMAs (f16 in shared memory) must follow the same order.
__device__ __forceinline__ void e4m3x16_to_f16_fragment_order(U32x4 v, U32x4& first,
                                                              U32x4& second) {
  e4m3x4_to_f16x4(v.x, first.x, second.x);
  e4m3x4_to_f16x4(v.y, first.y, second.y);
  e4m3x4_to_f16x4(v.z, first.z, second.z);
  e4m3x4_to_f16x4(v.w, first.w, second.w);
}

__device__ __forceinline__ U32x4 load_shared_u32x4(unsigned address) {
  U32x4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}

// M matrices of 8 x 8 16-bit elements from their mma fragments (thread l holds row l / 4,
// elements 2 (l % 4) and 2 (l % 4) + 1 in one register, the first in the low half) to shared
// memory, 16 bytes a memory row at the address lane 8m + k gives for row k of matrix m. Not
// transposed, memory row k is the fragment's row k; transposed (TRANS), its column k. The whole
// warp executes it.
template <int M, bool TRANS = false>
__device__ __forceinline__ void stmatrix(unsigned address, const unsigned (&r)[M]) {
  static_assert(M == 1 || M == 2 || M == 4, "stmatrix stores 1, 2 or 4 matrices");
  if constexpr (M == 1 && TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(address),
                 "r"(r[0])
                 : "memory");
  else if constexpr (M == 1)
    asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(address), "r"(r[0])
                 : "memory");
  else if constexpr (M == 2 && TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(address),
                 "r"(r[0]), "r"(r[1])
                 : "memory");
  else if constexpr (M == 2)
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(address),
                 "r"(r[0]), "r"(r[1])
                 : "memory");
  else if constexpr (TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                     address),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// The bytes of {low, high} (low: bytes 0-3, high: 4-7) that the selector's nibbles name, lowest
// result byte first (prmt).
__device__ __forceinline__ unsigned byte_perm(unsigned low, unsigned high, unsigned selector) {
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(low), "r"(high), "r"(selector));
  return r;
}

__device__ __forceinline__ void store_shared_u32x4(unsigned address, unsigned x, unsigned y,
                                                   unsigned z, unsigned w) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(x), "r"(y), "r"(z),
               "r"(w)
               : "memory");
}

// Thread-block clusters (sm_90). barrier.cluster counts every thread of the cluster that has
// not exited; arrive releases this thread's prior writes, wait acquires the others'.
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait;" ::: "memory");
}
// The shared address `address` of this CTA, as the same location in CTA `rank` of the cluster.
__device__ __forceinline__ unsigned cluster_map_shared(unsigned address, unsigned rank) {
  unsigned mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(address), "r"(rank));
  return mapped;
}
__device__ __forceinline__ void store_cluster_f32(unsigned address, float value) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(value) : "memory");
}

// Moves registers between warpgroups (setmaxnreg, sm_90a): every warp of the warpgroup runs
// it; the new per-thread count is a multiple of 8 in 24..256, and ptxas allocates the code
// after it within that count. dec frees registers for another warpgroup's inc.
template <int REGS> __device__ __forceinline__ void warpgroup_release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS> __device__ __forceinline__ void warpgroup_claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// Programmatic dependent launch (PTX griddepcontrol; cudaGridDependencySynchronize does not
// exist under NVRTC). launch_dependents lets the next kernel in the stream start once every CTA
// of this grid has run it or exited; wait blocks until the previous grid has completed and its
// memory is visible. Both are no-ops for a launch without the programmatic attribute.
__device__ __forceinline__ void grid_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

} // namespace specjit_kernels
