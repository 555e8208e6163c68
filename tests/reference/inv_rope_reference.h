// CPU reference of the fused inverse RoPE + FP8 quantization contract (../../shared/KERNELS.md,
// "Fused inverse RoPE + FP8 quantization"), bit for bit what kernels_src/inv_rope_fp8_quant.cu
// computes: the same operation order (fma(x0, c, x1*s), fma(x1, c, -(x0*s))), IEEE division
// for amax / 448, the scale's exponent from bits, and e4m3fn round-to-nearest-even with
// saturation. Build without -ffast-math (the default): every step relies on IEEE float.
// Used by the tests and the benchmarks.
#pragma once

#include <cstdint>
#include <vector>

namespace specjit::reference {

constexpr int64_t k_head_dim = 512;
constexpr int64_t k_nope_dim = 448;
constexpr int64_t k_rope_pairs = 32;
constexpr int64_t k_quant_block = 128;
constexpr int64_t k_blocks_per_head = k_head_dim / k_quant_block;
constexpr float k_e4m3_max = 448.0f;
constexpr float k_amax_floor = 1e-10f;

float bf16_to_float(uint16_t bits);
// Round to nearest even; NaN stays a (quiet) NaN.
uint16_t float_to_bf16(float value);

// e4m3fn (bias 7, no infinities, 0x7f / 0xff NaN, max 448 = 0x7e): round to nearest even,
// finite values beyond +-448 saturate to +-448 (PTX cvt.rn.satfinite), NaN becomes 0x7f.
uint8_t float_to_e4m3(float value);
float e4m3_to_float(uint8_t bits); // exact

// ceil(log2(r)) for finite r > 0 (subnormal r included), from r's bits.
int ceil_log2_positive(float r);
// 2^k exactly: subnormal down to 2^-149, 0 below, +inf above 2^127.
float exp2_int(int k);

struct BlockScale {
  float scale;   // 2^ceil(log2(max(amax, 1e-10) / 448))
  float inverse; // 2^-ceil(...), what the kernel multiplies by
};
BlockScale e4m3_block_scale(float amax);

// The inverse GPT-J rotation of one pair, in the pinned operation order.
void inverse_rotate(float x0, float x1, float c, float s, float& y0, float& y1);

struct InvRopeFp8QuantOutput {
  std::vector<uint8_t> fp8;  // [G, T, heads_per_group * 512]
  std::vector<float> scales; // [G, heads_per_group * 4, Ta], rows [T, Ta) zero
};

// o: [T, G * heads_per_group, 512] bf16 bits; positions: [T], each in [0, max_pos);
// cos_sin_cache: [max_pos, 64]. T = positions.size().
InvRopeFp8QuantOutput inv_rope_fp8_quant(const std::vector<uint16_t>& o,
                                         const std::vector<int64_t>& positions,
                                         const std::vector<float>& cos_sin_cache,
                                         int64_t num_groups, int64_t heads_per_group);

inline int64_t aligned_tokens(int64_t tokens) { return (tokens + 3) / 4 * 4; }

} // namespace specjit::reference
