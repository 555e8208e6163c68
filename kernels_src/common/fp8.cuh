// FP8 e4m3fn conversion and power-of-two block scales, without any CUDA header.
//
// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7f / 0xff are NaN;
// the largest finite value is 448 (0x7e). Conversion is cvt.rn.satfinite: round to nearest
// even, finite values beyond +-448 saturate, NaN stays NaN.
#pragma once

#include "common/bf16.cuh"

namespace specjit_kernels {

constexpr float k_e4m3_max = 448.0f;

// Two floats -> two e4m3 bytes packed in 16 bits: `low` at the lower address.
__device__ __forceinline__ unsigned e4m3x2(float low, float high) {
  unsigned short packed;
  // The first source operand goes to the upper byte of the result.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(high), "f"(low));
  return packed;
}

// Four floats -> four e4m3 bytes in one 32-bit word, v0 at the lowest address.
__device__ __forceinline__ unsigned e4m3x4(float v0, float v1, float v2, float v3) {
  return e4m3x2(v0, v1) | (e4m3x2(v2, v3) << 16);
}

// 2^k as a float, exactly: normal for k in [-126, 127], subnormal down to 2^-149, 0 below,
// +inf above.
__device__ __forceinline__ float exp2_int(int k) {
  if (k > 127)
    return bits_to_float(0x7f800000u);
  if (k >= -126)
    return bits_to_float(static_cast<unsigned>(k + 127) << 23);
  if (k >= -149)
    return bits_to_float(1u << (k + 149));
  return 0.0f;
}

// ceil(log2(r)) for r > 0, exactly, from r's bits: r's exponent, plus one unless r is an exact
// power of two. Subnormal r is handled (it cannot occur behind the 1e-10 floor, but the
// function should not depend on that).
__device__ __forceinline__ int ceil_log2_positive(float r) {
  const unsigned bits = float_to_bits(r);
  const int exponent = static_cast<int>((bits >> 23) & 0xffu);
  const unsigned mantissa = bits & 0x7fffffu;
  if (exponent == 0) {
    const int top = 31 - count_leading_zeros(mantissa); // r = mantissa * 2^-149
    return top - 149 + ((mantissa & (mantissa - 1)) != 0 ? 1 : 0);
  }
  return exponent - 127 + (mantissa != 0 ? 1 : 0);
}

// The block scale 2^ceil(log2(max(amax, 1e-10) / 448)) and its exact inverse. The division is
// IEEE (div.rn) so the CPU reference reproduces it bit for bit.
struct BlockScale {
  float scale;
  float inverse;
};

__device__ __forceinline__ BlockScale e4m3_block_scale(float amax) {
  const float r = div_rn(max_f32(amax, 1e-10f), k_e4m3_max);
  const int k = ceil_log2_positive(r);
  return {exp2_int(k), exp2_int(-k)};
}

} // namespace specjit_kernels
