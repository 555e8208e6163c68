#include "reference/inv_rope_reference.h"

#include <bit>
#include <cassert>
#include <cmath>

namespace specjit::reference {

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

uint16_t float_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint8_t float_to_e4m3(float value) {
  // Bit-level, so the reference keeps up with the hundreds of millions of elements the GPU tests
  // and benchmarks compare (the tests check it against a brute-force nearest-even search).
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return 0x7f; // NaN
  if (magnitude >= std::bit_cast<uint32_t>(k_e4m3_max))
    return sign | 0x7e; // saturate (rounding below 464 would give 448 anyway)
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 121) {
    // Below 2^-6, e4m3 is subnormal: steps of 2^-9. Scaling by 2^9 is exact; adding and
    // subtracting 2^23 rounds to an integer, half to even (the default rounding mode).
    const float scaled = std::bit_cast<float>(magnitude) * 512.0f;
    const float steps = (scaled + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint8_t>(steps); // 8 steps is 2^-6 = 0x08 exactly
  }
  // Normal: rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3 bits, half to
  // even; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t combined = ((exponent - 120) << 23) | (magnitude & 0x7fffffu);
  const uint32_t rounded = combined + 0x7ffffu + ((combined >> 20) & 1u);
  return sign | static_cast<uint8_t>(rounded >> 20);
}

float e4m3_to_float(uint8_t bits) {
  const bool negative = (bits & 0x80) != 0;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7)
    return std::nanf("");
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -9)
                              : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return negative ? -magnitude : magnitude;
}

int ceil_log2_positive(float r) {
  const uint32_t bits = std::bit_cast<uint32_t>(r);
  const int exponent = static_cast<int>((bits >> 23) & 0xffu);
  const uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0) {
    const int top = 31 - std::countl_zero(mantissa); // r = mantissa * 2^-149
    return top - 149 + ((mantissa & (mantissa - 1)) != 0 ? 1 : 0);
  }
  return exponent - 127 + (mantissa != 0 ? 1 : 0);
}

float exp2_int(int k) {
  if (k > 127)
    return std::bit_cast<float>(0x7f800000u);
  if (k >= -126)
    return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  if (k >= -149)
    return std::bit_cast<float>(1u << (k + 149));
  return 0.0f;
}

BlockScale e4m3_block_scale(float amax) {
  const float r = std::fmax(amax, k_amax_floor) / k_e4m3_max; // IEEE division
  const int k = ceil_log2_positive(r);
  return {exp2_int(k), exp2_int(-k)};
}

void inverse_rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  // Two separately rounded products feed the fused multiply-adds, as in the kernel.
  const float x1s = x1 * s;
  const float x0s = x0 * s;
  y0 = std::fma(x0, c, x1s);
  y1 = std::fma(x1, c, -x0s);
}

InvRopeFp8QuantOutput inv_rope_fp8_quant(const std::vector<uint16_t>& o,
                                         const std::vector<int64_t>& positions,
                                         const std::vector<float>& cos_sin_cache,
                                         int64_t num_groups, int64_t heads_per_group) {
  const int64_t tokens = static_cast<int64_t>(positions.size());
  const int64_t heads = num_groups * heads_per_group;
  const int64_t tokens_aligned = aligned_tokens(tokens);
  const int64_t columns = heads_per_group * k_blocks_per_head;
  assert(static_cast<int64_t>(o.size()) == tokens * heads * k_head_dim);

  InvRopeFp8QuantOutput out;
  out.fp8.assign(static_cast<size_t>(tokens * heads * k_head_dim), 0);
  out.scales.assign(static_cast<size_t>(num_groups * columns * tokens_aligned), 0.0f);

  float y[k_head_dim];
  for (int64_t t = 0; t < tokens; ++t) {
    const float* cos_row = cos_sin_cache.data() + positions[t] * 2 * k_rope_pairs;
    for (int64_t h = 0; h < heads; ++h) {
      const uint16_t* x = o.data() + (t * heads + h) * k_head_dim;
      for (int64_t d = 0; d < k_head_dim; ++d)
        y[d] = bf16_to_float(x[d]);
      for (int64_t i = 0; i < k_rope_pairs; ++i) {
        const int64_t d = k_nope_dim + 2 * i;
        inverse_rotate(y[d], y[d + 1], cos_row[i], cos_row[k_rope_pairs + i], y[d], y[d + 1]);
      }
      const int64_t g = h / heads_per_group;
      const int64_t j = h % heads_per_group;
      uint8_t* q = out.fp8.data() + ((g * tokens + t) * heads_per_group + j) * k_head_dim;
      for (int64_t b = 0; b < k_blocks_per_head; ++b) {
        float amax = 0.0f;
        for (int64_t e = 0; e < k_quant_block; ++e) {
          // max.f32 semantics: a NaN element leaves amax unchanged (amax itself is never NaN).
          const float magnitude = std::fabs(y[b * k_quant_block + e]);
          amax = magnitude > amax ? magnitude : amax;
        }
        const BlockScale scale = e4m3_block_scale(amax);
        for (int64_t e = 0; e < k_quant_block; ++e) {
          const int64_t d = b * k_quant_block + e;
          q[d] = float_to_e4m3(y[d] * scale.inverse);
        }
        out.scales[(g * columns + j * k_blocks_per_head + b) * tokens_aligned + t] = scale.scale;
      }
    }
  }
  return out;
}

} // namespace specjit::reference
