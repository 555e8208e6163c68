// Warp and shared-memory helpers of the MoE kernels (integer shuffles, shared atomics), as PTX:
// NVRTC has no built-in headers.
#pragma once

#include "common/mma.cuh"

namespace specjit_kernels {

__device__ __forceinline__ int shfl_xor_i32(int value, int lane_mask) {
  int result;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(result)
               : "r"(value), "r"(lane_mask));
  return result;
}

__device__ __forceinline__ float shfl_xor_f32(float value, int lane_mask) {
  float result;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=f"(result)
               : "f"(value), "r"(lane_mask));
  return result;
}

// Lane l receives lane l - delta's value (its own when l < delta).
__device__ __forceinline__ int shfl_up_i32(int value, int delta) {
  int result;
  asm volatile("shfl.sync.up.b32 %0, %1, %2, 0, 0xffffffff;"
               : "=r"(result)
               : "r"(value), "r"(delta));
  return result;
}

__device__ __forceinline__ int shfl_idx_i32(int value, int lane) {
  int result;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(result)
               : "r"(value), "r"(lane));
  return result;
}

// SiLU of the gated GEMM1 epilogue (x / (1 + e^-x)), shared by the mma.sync and wgmma GEMMs.
__device__ __forceinline__ float moe_silu(float x) { return div_rn(x, 1.0f + exp_approx(-x)); }

// atomicAdd on a shared int; returns the old value.
__device__ __forceinline__ int shared_fetch_add(int* address, int value) {
  int old;
  asm volatile("atom.shared.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "r"(shared_address(address)), "r"(value)
               : "memory");
  return old;
}

} // namespace specjit_kernels
