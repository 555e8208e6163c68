// bf16 and the few bit-level helpers the kernels need, without any CUDA header (NVRTC has no
// built-in headers; see ../../../shared/KERNELS.md, "Writing kernels for NVRTC").
//
// bf16 values travel as their 16-bit patterns (unsigned short). Arithmetic helpers are inline
// PTX with an explicit rounding mode and no .ftz, so the results are the IEEE ones whatever
// NVRTC options (-ftz, --use_fast_math, contraction) a build passes: kernels that must match a
// CPU reference bit for bit use these instead of operators.
#pragma once

namespace specjit_kernels {

// 16 bytes, for one vectorized global load or store (ld/st.global.v4.u32).
struct alignas(16) U32x4 {
  unsigned x, y, z, w;
};

struct alignas(16) F32x4 {
  float x, y, z, w;
};

__device__ __forceinline__ float bits_to_float(unsigned bits) {
  float value;
  asm("mov.b32 %0, %1;" : "=f"(value) : "r"(bits));
  return value;
}

__device__ __forceinline__ unsigned float_to_bits(float value) {
  unsigned bits;
  asm("mov.b32 %0, %1;" : "=r"(bits) : "f"(value));
  return bits;
}

// The two bf16 values packed in a 32-bit word (low half = lower address), widened exactly.
__device__ __forceinline__ float bf16_low(unsigned packed) { return bits_to_float(packed << 16); }
__device__ __forceinline__ float bf16_high(unsigned packed) {
  return bits_to_float(packed & 0xffff0000u);
}

__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

__device__ __forceinline__ float mul_rn(float a, float b) {
  float d;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// IEEE division, correctly rounded (never the approximate div.full of fast math).
__device__ __forceinline__ float div_rn(float a, float b) {
  float d;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// max.f32 returns the other operand when one is NaN, like std::fmax on the host.
__device__ __forceinline__ float max_f32(float a, float b) {
  float d;
  asm("max.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// |a| (abs.f32, no .ftz: subnormals keep their value). ptxas folds it into the operand of a
// following max (FMNMX |R|), so an amax loop costs one instruction per element. (A NaN's
// payload is unspecified, which max_f32 makes irrelevant: it drops NaN operands.)
__device__ __forceinline__ float abs_f32(float a) {
  float d;
  asm("abs.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}

__device__ __forceinline__ int count_leading_zeros(unsigned value) {
  int count;
  asm("clz.b32 %0, %1;" : "=r"(count) : "r"(value));
  return count;
}

__device__ __forceinline__ float shfl_xor(float value, int lane_mask) {
  float result;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=f"(result)
               : "f"(value), "r"(lane_mask));
  return result;
}

// 16 bytes from memory that no thread of this grid writes, read once: the non-coherent path,
// without allocating in L1 (streaming inputs would only evict useful lines).
__device__ __forceinline__ U32x4 load_streaming(const void* address) {
  U32x4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(address));
  return v;
}

__device__ __forceinline__ F32x4 load_readonly_f32x4(const float* address) {
  F32x4 v;
  asm("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "l"(address));
  return v;
}

// 8 bytes (st.global.v2.u32): a warp writing 32 consecutive ones writes 256 contiguous bytes.
__device__ __forceinline__ void store_u32x2(void* address, unsigned x, unsigned y) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(address), "r"(x), "r"(y) : "memory");
}

// The same with an evict-first hint (st.global.cs): output that nothing in the kernel reads
// again leaves L2 before lines still being filled (the kernel's partial-sector outputs).
__device__ __forceinline__ void store_u32x2_streaming(void* address, unsigned x, unsigned y) {
  asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(address), "r"(x), "r"(y) : "memory");
}

__device__ __forceinline__ void store_u32x4(void* address, U32x4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

} // namespace specjit_kernels
