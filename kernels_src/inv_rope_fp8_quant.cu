// Fused inverse RoPE + FP8 quantization of the attention output (DeepSeek-V4); the contract is
// in ../../shared/KERNELS.md, "Fused inverse RoPE + FP8 quantization", and
// ops/inv_rope/inv_rope_fp8_quant.h.
//
// Work unit: a warp's task is 2^task_shift consecutive tokens of one head (1..8, picked by the
// op from T); items are (token, head) rows. The 1 KiB bf16 row is read with two 16-byte loads per
// lane, each load of the warp covering 512 contiguous bytes: lane l holds elements [8 l, 8 l + 8)
// of half 0 (elements 0..255) and of half 1 (256..511). A 128-element quantization block is 16
// lanes of one half, so each lane takes part in two blocks (amax: four butterfly shuffles each,
// after which all 16 lanes hold the block's scale). Lanes 24..31 hold the rotated dims 448..511 in
// half 1: each reads its 4 cos and 4 sin values with two 16-byte loads. Each lane writes 8 fp8
// bytes per half (a warp writes 256 contiguous bytes per store), evict-first in L2.
//
// Scales: out_scales is token-contiguous per column, so one warp handling 8 tokens of a head
// writes each of its 4 columns as one full 32-byte sector (lanes 0..7 and 16..23, one float
// each) instead of 8 scattered 4-byte stores. Scattered scale stores cost ~13% of the large-T
// time (docs/bench/inv-rope-notes.md). Small T takes fewer tokens per task (down to 1) so that
// every warp still gets work and no warp walks several tokens in sequence; the same stores
// also write the zero TMA padding rows [T, Ta).
//
// The grid is persistent (the op sizes it from the SM count and the kernel's occupancy, with an
// equal number of tasks per warp); warps walk the tasks in a grid-stride loop, token-block-
// major, and each warp loads its next item's row into registers before it processes the
// current one.
//
// Bit-exactness with the CPU reference (tests/reference/inv_rope_reference.cpp) rests on the
// pinned operation order: y0 = fma(x0, c, x1*s), y1 = fma(x1, c, -(x0*s)); the scale
// 2^ceil(log2(amax / 448)) equal to the reference's IEEE-division form (derived from amax's
// bits, common/fp8.cuh); q = e4m3(y * 2^-k) with round-to-nearest-even and saturation. All of it is
// written with explicit-rounding PTX (common/bf16.cuh), so no NVRTC option can change it.
#include "common/bf16.cuh"
#include "common/fp8.cuh"
#include "common/spec.cuh"

namespace specjit_kernels {

namespace inv_rope {
inline constexpr int k_head_dim = 512;
inline constexpr int k_half_dim = 256; // one 16-byte load per lane covers half a head
inline constexpr int k_nope_dim = 448; // dims [0, 448) pass through
inline constexpr int k_rope_pairs = 32;
inline constexpr int k_quant_block = 128;
inline constexpr int k_blocks_per_head = k_head_dim / k_quant_block;
inline constexpr int k_elements_per_load = 8;                                             // per lane
inline constexpr int k_lanes_per_block = k_quant_block / k_elements_per_load;             // 16
inline constexpr int k_first_rope_lane = (k_nope_dim - k_half_dim) / k_elements_per_load; // 24 (half 1)
inline constexpr int k_warps_per_cta = 8;  // the op launches 256-thread CTAs
inline constexpr int k_max_task_shift = 3; // at most 8 tokens per task (lanes [0, 8) and [16, 24))

__device__ __forceinline__ void widen(const U32x4& v, float (&y)[8]) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    y[2 * w] = bf16_low(words[w]);
    y[2 * w + 1] = bf16_high(words[w]);
  }
}

// The block's scale: amax over this lane's 8 values, then over the 16 lanes of its block.
__device__ __forceinline__ BlockScale block_scale(const float (&y)[8]) {
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    amax = max_f32(amax, abs_f32(y[e]));
#pragma unroll
  for (int mask = 1; mask < k_lanes_per_block; mask <<= 1)
    amax = max_f32(amax, shfl_xor(amax, mask));
  return e4m3_block_scale(amax);
}

// Quantizes this lane's 8 values and writes them (8 bytes, evict-first in L2: nothing reads
// them again, and the scale lines still being filled should stay); returns the block's scale
// (every lane of the block gets it).
__device__ __forceinline__ float quantize_store(const float (&y)[8], unsigned char* out) {
  const BlockScale scale = block_scale(y);
  const unsigned q0 = e4m3x4(mul_rn(y[0], scale.inverse), mul_rn(y[1], scale.inverse),
                             mul_rn(y[2], scale.inverse), mul_rn(y[3], scale.inverse));
  const unsigned q1 = e4m3x4(mul_rn(y[4], scale.inverse), mul_rn(y[5], scale.inverse),
                             mul_rn(y[6], scale.inverse), mul_rn(y[7], scale.inverse));
  store_u32x2_streaming(out, q0, q1);
  return scale.scale;
}
} // namespace inv_rope

template <int GROUPS, int HEADS_PER_GROUP, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(inv_rope::k_warps_per_cta * 32)
    inv_rope_fp8_quant(const unsigned short* __restrict__ o,
                       const long long* __restrict__ positions,
                       const float* __restrict__ cos_sin_cache, unsigned char* __restrict__ out_fp8,
                       float* __restrict__ out_scales, int num_tokens, int task_shift) {
  using namespace inv_rope;
  static_assert(GROUPS >= 1 && HEADS_PER_GROUP >= 1, "at least one head");
  // A task is 2^task_shift consecutive tokens of one head (the op picks task_shift in
  // [0, k_max_task_shift] from T: 8 tokens when the grid stays full, fewer for small T).
  const int tokens_per_task = 1 << task_shift;
  constexpr int heads = GROUPS * HEADS_PER_GROUP;
  constexpr int scale_columns = HEADS_PER_GROUP * k_blocks_per_head; // k per group

  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const long long tokens_aligned = (tokens + 3) & ~3LL; // Ta: TMA wants 16-byte scale rows
  const int lane = static_cast<int>(threadIdx.x) & 31;

  // The op guarantees T * H < 2^31 (its validation), so task and item indices are 32-bit;
  // addresses are computed in 64 bits.
  const int token_count = static_cast<int>(tokens);
  const int tasks = ((token_count + tokens_per_task - 1) >> task_shift) * heads;
  const int warp_stride = static_cast<int>(gridDim.x) * k_warps_per_cta;
  int task = static_cast<int>(blockIdx.x) * k_warps_per_cta + static_cast<int>(threadIdx.x >> 5);
  if (task >= tasks)
    return;

  // A task is (token block, head): tokens [t0, t0 + tokens_per_task) of one head, so the warp
  // ends up with the scales of consecutive rows of its scale columns.
  int h = task - task / heads * heads;
  int t0 = task / heads << task_shift;
  int k = 0; // the token within the task
  const unsigned short* lane_o = o + lane * k_elements_per_load;
  U32x4 a, b;
  long long position;
  {
    const unsigned short* row = lane_o + (static_cast<long long>(t0) * heads + h) * k_head_dim;
    a = load_streaming(row);
    b = load_streaming(row + k_half_dim);
    position = positions[t0];
  }
  float kept0 = 0.0f, kept1 = 0.0f; // lane l: the scales of token l % tokens_per_task

  for (;;) {
    // The next item of this warp: the task's next token, else the next task's first.
    int next_task = task, next_t0 = t0, next_h = h, next_k = k + 1;
    const bool task_done = next_k == tokens_per_task || t0 + next_k >= token_count;
    if (task_done) {
      next_task = task + warp_stride; // < 2^31: tasks + stride fits easily
      next_h = next_task - next_task / heads * heads;
      next_t0 = next_task / heads << task_shift;
      next_k = 0;
    }
    const bool has_next = next_task < tasks;
    U32x4 next_a = a, next_b = b;
    long long next_position = position;
    if (has_next) {
      const int next_t = next_t0 + next_k;
      const unsigned short* next_row =
          lane_o + (static_cast<long long>(next_t) * heads + next_h) * k_head_dim;
      next_a = load_streaming(next_row);
      next_b = load_streaming(next_row + k_half_dim);
      next_position = positions[next_t];
    }
    F32x4 c = {}, s = {};
    if (lane >= k_first_rope_lane) {
      // This lane's 4 pairs are i = 4 (lane - 24) + p, p in [0, 4).
      const float* cos_row =
          cos_sin_cache + position * (2 * k_rope_pairs) + (lane - k_first_rope_lane) * 4;
      c = load_readonly_f32x4(cos_row);
      s = load_readonly_f32x4(cos_row + k_rope_pairs);
    }

    const int t = t0 + k;
    const int g = h / HEADS_PER_GROUP;
    const int j = h - g * HEADS_PER_GROUP;
    // out_fp8 [G, T, HEADS_PER_GROUP * 512].
    const long long out_row = (static_cast<long long>(g) * tokens + t) * HEADS_PER_GROUP + j;
    unsigned char* out = out_fp8 + out_row * k_head_dim + lane * k_elements_per_load;

    float y[8];
    widen(a, y);
    const float scale0 = quantize_store(y, out);

    widen(b, y);
    if (lane >= k_first_rope_lane) {
      const float cs[4] = {c.x, c.y, c.z, c.w};
      const float sn[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float x0 = y[2 * p];
        const float x1 = y[2 * p + 1];
        y[2 * p] = fma_rn(x0, cs[p], mul_rn(x1, sn[p]));
        y[2 * p + 1] = fma_rn(x1, cs[p], -mul_rn(x0, sn[p]));
      }
    }
    const float scale1 = quantize_store(y, out + k_half_dim);

    // Lanes 0..15 hold the scales of blocks 0 and 2, lanes 16..31 of blocks 1 and 3; lane l
    // keeps token l % tokens_per_task's.
    if ((lane & (tokens_per_task - 1)) == k) {
      kept0 = scale0;
      kept1 = scale1;
    }
    if (task_done) {
      // out_scales [G, k, Ta]: column j * 4 + block of group g. Lanes [0, tokens_per_task)
      // write rows t0.. of blocks 0 and 2, lanes [16, 16 + tokens_per_task) of blocks 1 and 3:
      // tokens_per_task * 4 contiguous bytes per column (a full 32-byte sector for 8 tokens).
      // Rows [T, Ta) (the TMA padding, < 4 rows) get zeros from the last token block's tasks,
      // past their own tokens when a task has fewer than 4 (Ta <= t0 + tokens_per_task + 3, so
      // lanes [0, 16) reach them); no row at or past Ta is written.
      const int block_row = lane & (k_lanes_per_block - 1);
      const int row = t0 + block_row;
      const bool last_block = t0 + tokens_per_task >= token_count;
      if (row < tokens_aligned &&
          (block_row < tokens_per_task || (last_block && row >= token_count))) {
        const bool real = row < token_count;
        const int column = g * scale_columns + j * k_blocks_per_head + lane / k_lanes_per_block;
        float* scale_out = out_scales + static_cast<long long>(column) * tokens_aligned + row;
        scale_out[0] = real ? kept0 : 0.0f;
        scale_out[2 * tokens_aligned] = real ? kept1 : 0.0f;
      }
    }

    if (!has_next)
      break;
    task = next_task;
    t0 = next_t0;
    h = next_h;
    k = next_k;
    a = next_a;
    b = next_b;
    position = next_position;
  }
}

} // namespace specjit_kernels
