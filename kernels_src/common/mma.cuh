// Tensor-core and asynchronous-copy wrappers for mma.sync GEMMs, without any CUDA header.
//
// Shared-memory tiles are handled in bytes: a bf16 m16n8k16 fragment and an e4m3 m16n8k32
// fragment are both 16 rows x 32 bytes (A) and 8 rows x 32 bytes (B, K contiguous), with the
// same register layout at the byte level, so one ldmatrix addressing serves both types.
#pragma once

#include "common/bf16.cuh"

namespace specjit_kernels {

// The 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  unsigned long long address;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(address) : "l"(pointer));
  return static_cast<unsigned>(address);
}

// 16 bytes global -> shared, bypassing L1; src_bytes == 0 fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async_16(unsigned shared, const void* global, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared), "l"(global),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int PENDING> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// Four 8x8 b16 matrices (8 rows of 16 bytes each); lane l gives the address of row l % 8 of
// matrix l / 8 and receives row l / 4, word l % 4 of each matrix.
__device__ __forceinline__ void ldmatrix_x4(unsigned shared, unsigned& r0, unsigned& r1,
                                            unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(shared));
}

// D = A * B + D, fp32 accumulation. A: 4 registers (16 x 32 bytes), B: 2 (8 x 32 bytes).
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> two bf16 (round to nearest even) packed in 32 bits, `low` at the lower address.
__device__ __forceinline__ unsigned bf16x2(float low, float high) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}

// e^x through ex2.approx (about 2 ulp): softmax and SiLU, never compared bit for bit.
__device__ __forceinline__ float exp_approx(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// 1 / x through rcp.approx (about 1 ulp; flushes denormals): SiLU's division, whose IEEE form
// (div.rn) runs a slow-path subroutine on the GEMM1 epilogue's critical path. 1 / inf = 0.
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void store_u32(void* address, unsigned v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(address), "r"(v) : "memory");
}

__device__ __forceinline__ void store_u8(void* address, unsigned v) {
  asm volatile("st.global.u8 [%0], %1;" ::"l"(address), "r"(v) : "memory");
}

__device__ __forceinline__ void store_u16(void* address, unsigned short v) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(address), "h"(v) : "memory");
}

} // namespace specjit_kernels
