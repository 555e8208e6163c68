// Fused inverse RoPE + FP8 quantization of the attention output (DeepSeek-V4); the contract is
// in ../../shared/KERNELS.md, "Fused inverse RoPE + FP8 quantization", and
// runtime/ops/inv_rope_fp8_quant.h.
//
// One warp per (token, head): lane l holds elements [16 l, 16 l + 16) of the 512-element head
// (two 16-byte loads), so a 128-element quantization block is 8 lanes and its amax is three
// butterfly shuffles. Lanes 28..31 hold the rotated dims 448..511: each reads its 8 cos and 8
// sin values with four 16-byte loads. Each lane writes its 16 fp8 bytes with one 16-byte store
// (a warp writes 512 contiguous bytes) and the first lane of each block writes the scale.
// Warps walk (token, head) items in a grid-stride loop, token-major, so consecutive warps read
// consecutive 1 KiB rows of `o`.
//
// Bit-exactness with the CPU reference (tests/reference/inv_rope_reference.cpp) rests on the
// pinned operation order: y0 = fma(x0, c, x1*s), y1 = fma(x1, c, -(x0*s)); IEEE division for
// amax / 448; the scale's exponent taken from bits; q = e4m3(y * 2^-k) with round-to-nearest-
// even and saturation. All of it is written with explicit-rounding PTX (common/bf16.cuh), so no
// NVRTC option can change it.
#include "common/bf16.cuh"
#include "common/fp8.cuh"
#include "common/spec.cuh"

namespace specjit_kernels {

namespace inv_rope {
constexpr int k_head_dim = 512;
constexpr int k_nope_dim = 448; // dims [0, 448) pass through
constexpr int k_rope_pairs = 32;
constexpr int k_quant_block = 128;
constexpr int k_blocks_per_head = k_head_dim / k_quant_block;
constexpr int k_elements_per_lane = 16;
constexpr int k_lanes_per_block = k_quant_block / k_elements_per_lane; // 8
constexpr int k_first_rope_lane = k_nope_dim / k_elements_per_lane;    // 28
constexpr int k_warps_per_cta = 8; // the op launches 256-thread CTAs
} // namespace inv_rope

template <int GROUPS, int HEADS_PER_GROUP, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(inv_rope::k_warps_per_cta * 32)
    inv_rope_fp8_quant(const unsigned short* __restrict__ o,
                       const long long* __restrict__ positions,
                       const float* __restrict__ cos_sin_cache, unsigned char* __restrict__ out_fp8,
                       float* __restrict__ out_scales, int num_tokens) {
  using namespace inv_rope;
  static_assert(GROUPS >= 1 && HEADS_PER_GROUP >= 1, "at least one head");
  constexpr int heads = GROUPS * HEADS_PER_GROUP;
  constexpr int scale_columns = HEADS_PER_GROUP * k_blocks_per_head; // k per group

  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const long long tokens_aligned = (tokens + 3) & ~3LL; // Ta: TMA wants 16-byte scale rows
  const int lane = static_cast<int>(threadIdx.x) & 31;

  // Rows [T, Ta) of every scale column are zero (at most 3 per column).
  const long long padding = tokens_aligned - tokens;
  if (padding != 0) {
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = thread; i < GROUPS * scale_columns * padding; i += threads) {
      const long long column = i / padding;
      out_scales[column * tokens_aligned + tokens + (i - column * padding)] = 0.0f;
    }
  }

  // The op guarantees T * H < 2^31 (its validation), so item indices are 32-bit; addresses are
  // computed in 64 bits.
  const int items = static_cast<int>(tokens) * heads;
  const int warp_stride = static_cast<int>(gridDim.x) * k_warps_per_cta;
  int item = static_cast<int>(blockIdx.x) * k_warps_per_cta + static_cast<int>(threadIdx.x >> 5);

  for (; item < items; item += warp_stride) {
    const int t = item / heads;
    const int h = item - t * heads;
    const int g = h / HEADS_PER_GROUP;
    const int j = h - g * HEADS_PER_GROUP;

    const unsigned short* row =
        o + static_cast<long long>(item) * k_head_dim + lane * k_elements_per_lane;
    const U32x4 a = load_streaming(row);
    const U32x4 b = load_streaming(row + 8);

    const unsigned words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float y[k_elements_per_lane];
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      y[2 * w] = bf16_low(words[w]);
      y[2 * w + 1] = bf16_high(words[w]);
    }

    if (lane >= k_first_rope_lane) {
      // This lane's 8 pairs are i = 8 (lane - 28) + p, p in [0, 8).
      const float* cos_row =
          cos_sin_cache + positions[t] * (2 * k_rope_pairs) + (lane - k_first_rope_lane) * 8;
      const F32x4 c0 = load_readonly_f32x4(cos_row);
      const F32x4 c1 = load_readonly_f32x4(cos_row + 4);
      const F32x4 s0 = load_readonly_f32x4(cos_row + k_rope_pairs);
      const F32x4 s1 = load_readonly_f32x4(cos_row + k_rope_pairs + 4);
      const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
      const float s[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
      for (int p = 0; p < 8; ++p) {
        const float x0 = y[2 * p];
        const float x1 = y[2 * p + 1];
        y[2 * p] = fma_rn(x0, c[p], mul_rn(x1, s[p]));
        y[2 * p + 1] = fma_rn(x1, c[p], -mul_rn(x0, s[p]));
      }
    }

    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < k_elements_per_lane; ++e)
      amax = max_f32(amax, abs_f32(y[e]));
#pragma unroll
    for (int mask = 1; mask < k_lanes_per_block; mask <<= 1)
      amax = max_f32(amax, shfl_xor(amax, mask));
    const BlockScale scale = e4m3_block_scale(amax);

    U32x4 q;
    q.x = e4m3x4(mul_rn(y[0], scale.inverse), mul_rn(y[1], scale.inverse),
                 mul_rn(y[2], scale.inverse), mul_rn(y[3], scale.inverse));
    q.y = e4m3x4(mul_rn(y[4], scale.inverse), mul_rn(y[5], scale.inverse),
                 mul_rn(y[6], scale.inverse), mul_rn(y[7], scale.inverse));
    q.z = e4m3x4(mul_rn(y[8], scale.inverse), mul_rn(y[9], scale.inverse),
                 mul_rn(y[10], scale.inverse), mul_rn(y[11], scale.inverse));
    q.w = e4m3x4(mul_rn(y[12], scale.inverse), mul_rn(y[13], scale.inverse),
                 mul_rn(y[14], scale.inverse), mul_rn(y[15], scale.inverse));
    // out_fp8 [G, T, HEADS_PER_GROUP * 512].
    const long long out_row = (static_cast<long long>(g) * tokens + t) * HEADS_PER_GROUP + j;
    store_u32x4(out_fp8 + out_row * k_head_dim + lane * k_elements_per_lane, q);
    // out_scales [G, k, Ta]: column j * 4 + block of group g.
    if ((lane & (k_lanes_per_block - 1)) == 0) {
      const int column = g * scale_columns + j * k_blocks_per_head + lane / k_lanes_per_block;
      out_scales[static_cast<long long>(column) * tokens_aligned + t] = scale.scale;
    }
  }
}

} // namespace specjit_kernels
