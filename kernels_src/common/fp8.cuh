// FP8 e4m3fn conversion and power-of-two block scales, without any CUDA header.
//
// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7f / 0xff are NaN;
// the largest finite value is 448 (0x7e). Conversion is cvt.rn.satfinite: round to nearest
// even, finite values beyond +-448 saturate, NaN stays NaN.
#pragma once

#include "common/bf16.cuh"

namespace specjit_kernels {

inline constexpr float k_e4m3_max = 448.0f;

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

// The block scale 2^ceil(log2(max(amax, 1e-10) / 448)) and its exact inverse, for amax >= 0
// (never NaN: max_f32 drops NaN elements), bit for bit what the CPU reference gets with an
// IEEE division, ceil(log2) from the quotient's bits and exact powers of two
// (tests/reference/inv_rope_reference.cpp), without the division:
//
// Let a = max(amax, 1e-10) = 1.m * 2^e (normal) and r = RN(a / 448), 448 = 1.75 * 2^8.
// - 1.m > 1.75: a / 448 lies in (1, 8/7) * 2^(e-8) and RN cannot reach 2^(e-8) (the nearest
//   a above 1.75 * 2^e is one ulp, 2^-23 / 1.75 relatively, more than half an ulp of 1), so
//   ceil(log2 r) = e - 7.
// - 1.m = 1.75: r = 2^(e-8) exactly, k = e - 8.
// - 1.m < 1.75: a / 448 lies in [4/7, 1) * 2^(e-8), and RN cannot round up to 2^(e-8) (same
//   argument), so k = e - 8.
// r is normal for a in [1e-10, FLT_MAX], so k = e - 8 + (mantissa > 0x600000) in [-41, 120]:
// 2^k and 2^-k are normal, written straight from their exponents. a = +inf (an infinite
// input) gives r = inf, k = 128: scale +inf, inverse 2^-128 (subnormal, 0x00200000).
// An exhaustive host check over every a in [0, +inf] matched the division form.
struct BlockScale {
  float scale;
  float inverse;
};

__device__ __forceinline__ BlockScale e4m3_block_scale(float amax) {
  const unsigned bits = float_to_bits(max_f32(amax, 1e-10f)); // sign bit clear
  const unsigned exponent = bits >> 23;                       // biased, 1..255
  const unsigned scale_exponent = exponent - 8 + ((bits & 0x7fffffu) > 0x600000u ? 1u : 0u);
  if (exponent == 255)
    return {bits_to_float(0x7f800000u), bits_to_float(0x00200000u)};
  return {bits_to_float(scale_exponent << 23), bits_to_float((254u - scale_exponent) << 23)};
}

} // namespace specjit_kernels
