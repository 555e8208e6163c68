// The two grouped GEMMs of the MoE layer, on tensor cores (mma.sync), for e4m3 (W8A8 per
// tensor) and bf16 (moe/gemm_args.h has the arguments):
//   GEMM1  A = hidden [T, K] gathered by slot / top_k, B = w13[e] [2N, K]; epilogue
//          silu(gate) * up, written in sorted order (moe_intermediate_row) to the intermediate
//          [max padded, N] as e4m3 (divided by the static scale a2) or bf16.
//   GEMM2  A = intermediate rows of the block, B = w2[e] [N, K]; epilogue times the
//          router weight in fp32, written per slot to slot_out [T*k, N] bf16.
// Grid: x = N tiles, y = blocks of BLOCK_M sorted slots (launched for the worst case; blocks at
// or past num_tokens_post_padded exit at once). FP8 scales are applied once after the K loop:
// acc * (a_scale * w_scale[e]).
//
// Tiles live in shared memory as rows of 128 bytes (64 bf16 or 128 e4m3 of K), 16-byte chunks
// XOR-swizzled by row so ldmatrix reads are conflict-free, filled by a STAGES-deep cp.async
// pipeline. A bf16 m16n8k16 and an e4m3 m16n8k32 fragment are the same 32 bytes per row, so the
// fragment loads are shared; only the mma instruction differs.
//
// GEMM1's B tile interleaves gate and up rows in groups of 8 (tile rows 16p..16p+7 are gate
// columns c..c+7, rows 16p+8..16p+15 the matching up columns), so each warp holds gate and up
// of the same output column in adjacent n-fragments.
#include "common/fp8.cuh"
#include "common/mma.cuh"
#include "common/spec.cuh"
#include "moe/gemm_args.h"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

namespace moe_gemm_detail {
inline constexpr int k_row_bytes = 128; // bytes of K per tile row and pipeline stage
inline constexpr int k_chunks = k_row_bytes / 16;

__device__ __forceinline__ int swizzle(int row, int chunk) { return chunk ^ (row & 7); }
} // namespace moe_gemm_detail

template <bool FP8, bool GATED, int N, int K, int BLOCK_M, int BLOCK_N, int WARPS_M, int WARPS_N,
          int STAGES>
struct MoeGemm {
  static constexpr int k_element_bytes = FP8 ? 1 : 2;
  static constexpr int k_k_bytes = K * k_element_bytes;
  static constexpr int k_k_tiles = k_k_bytes / moe_gemm_detail::k_row_bytes;
  static constexpr int k_threads = WARPS_M * WARPS_N * 32;
  static constexpr int k_warp_m = BLOCK_M / WARPS_M;
  static constexpr int k_warp_n = BLOCK_N / WARPS_N;
  static constexpr int k_mi = k_warp_m / 16;
  static constexpr int k_ni = k_warp_n / 8;
  static constexpr int k_w_rows = GATED ? 2 * N : N; // rows of one expert's weight
  static constexpr int k_out_per_tile = GATED ? BLOCK_N / 2 : BLOCK_N;
  static constexpr int k_stage_bytes = (BLOCK_M + BLOCK_N) * moe_gemm_detail::k_row_bytes;

  static_assert(k_k_bytes % moe_gemm_detail::k_row_bytes == 0, "K must fill 128-byte rows");
  static_assert(BLOCK_M % (16 * WARPS_M) == 0, "warp tiles are multiples of 16 rows");
  static_assert(BLOCK_N % (16 * WARPS_N) == 0, "warp tiles are multiples of 16 columns");
  static_assert(N % k_out_per_tile == 0, "N must be a multiple of the tile's output columns");
  static_assert(STAGES >= 2, "at least double buffering");

  const unsigned char* a;
  const unsigned char* w;
  const int* sorted_ids;
  int num_slots;
  int a_row_divisor; // GEMM1: top_k (slot -> token row); GEMM2: 0 (sorted position)
  int expert;
  int m_block;
  int n_tile;
  unsigned char* smem;
  const int* a_rows; // shared [BLOCK_M]: A row of each tile row, -1 for padding

  __device__ __forceinline__ int w_row(int r) const {
    if constexpr (GATED) {
      const int group = r >> 3;
      return ((group & 1) ? N : 0) + n_tile * (BLOCK_N / 2) + (group >> 1) * 8 + (r & 7);
    } else {
      return n_tile * BLOCK_N + r;
    }
  }

  __device__ __forceinline__ void load_stage(int stage, int k_tile) const {
    using namespace moe_gemm_detail;
    unsigned char* a_tile = smem + stage * k_stage_bytes;
    unsigned char* b_tile = a_tile + BLOCK_M * k_row_bytes;
    const int tid = static_cast<int>(threadIdx.x);
    const long long k_offset = static_cast<long long>(k_tile) * k_row_bytes;
#pragma unroll
    for (int c = tid; c < BLOCK_M * k_chunks; c += k_threads) {
      const int r = c / k_chunks;
      const int chunk = c % k_chunks;
      const int row = a_rows[r];
      const unsigned char* src =
          a + static_cast<long long>(row < 0 ? 0 : row) * k_k_bytes + k_offset + chunk * 16;
      cp_async_16(shared_address(a_tile + r * k_row_bytes + swizzle(r, chunk) * 16), src,
                  row < 0 ? 0 : 16);
    }
    const unsigned char* w_expert = w + static_cast<long long>(expert) * k_w_rows * k_k_bytes;
#pragma unroll
    for (int c = tid; c < BLOCK_N * k_chunks; c += k_threads) {
      const int r = c / k_chunks;
      const int chunk = c % k_chunks;
      const unsigned char* src =
          w_expert + static_cast<long long>(w_row(r)) * k_k_bytes + k_offset + chunk * 16;
      cp_async_16(shared_address(b_tile + r * k_row_bytes + swizzle(r, chunk) * 16), src, 16);
    }
  }

  __device__ __forceinline__ void compute_stage(int stage, float (&acc)[k_mi][k_ni][4]) const {
    using namespace moe_gemm_detail;
    const unsigned a_tile = shared_address(smem + stage * k_stage_bytes);
    const unsigned b_tile = a_tile + BLOCK_M * k_row_bytes;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int warp_m = warp / WARPS_N;
    const int warp_n = warp % WARPS_N;
#pragma unroll
    for (int ks = 0; ks < k_row_bytes / 32; ++ks) {
      unsigned af[k_mi][4];
      unsigned bf[k_ni][2];
#pragma unroll
      for (int mi = 0; mi < k_mi; ++mi) {
        const int row = warp_m * k_warp_m + mi * 16 + (lane & 15);
        const int chunk = ks * 2 + (lane >> 4);
        ldmatrix_x4(a_tile + row * k_row_bytes + swizzle(row, chunk) * 16, af[mi][0], af[mi][1],
                    af[mi][2], af[mi][3]);
      }
#pragma unroll
      for (int nj = 0; nj < k_ni / 2; ++nj) {
        const int row = warp_n * k_warp_n + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int chunk = ks * 2 + ((lane >> 3) & 1);
        ldmatrix_x4(b_tile + row * k_row_bytes + swizzle(row, chunk) * 16, bf[2 * nj][0],
                    bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < k_mi; ++mi)
#pragma unroll
        for (int ni = 0; ni < k_ni; ++ni) {
          if constexpr (FP8)
            mma_e4m3_16832(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
          else
            mma_bf16_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
    }
  }

  __device__ __forceinline__ void main_loop(float (&acc)[k_mi][k_ni][4]) const {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_k_tiles)
        load_stage(s, s);
      cp_async_commit();
    }
#pragma unroll 1
    for (int kt = 0; kt < k_k_tiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int next = kt + STAGES - 1;
      if (next < k_k_tiles)
        load_stage(next % STAGES, next);
      cp_async_commit();
      compute_stage(kt % STAGES, acc);
    }
    cp_async_wait<0>();
  }
};

// Shared setup of both GEMMs: early exit past the padded count, the tile's A rows and slots.
// Returns false when the block has no work.
template <int BLOCK_M>
__device__ __forceinline__ bool moe_gemm_block(const int* sorted_ids, const int* expert_ids,
                                               const int* num_tokens_post_padded, int num_slots,
                                               int a_row_divisor, int* a_rows, int* slot_of_row,
                                               int& expert) {
  const int m_block = static_cast<int>(blockIdx.y);
  if (m_block * BLOCK_M >= moe_ldg(num_tokens_post_padded))
    return false;
  expert = moe_ldg(expert_ids + m_block);
  moe_block_rows<BLOCK_M>(sorted_ids, m_block, num_slots, a_row_divisor, a_rows, slot_of_row);
  __syncthreads();
  return true;
}

template <bool FP8, int N, int K, int BLOCK_M, int BLOCK_N, int WARPS_M, int WARPS_N, int STAGES,
          long long NUM_TOKENS_SPEC>
__device__ __forceinline__ void
moe_gemm1_body(const unsigned char* __restrict__ hidden, const unsigned char* __restrict__ w13,
               const int* __restrict__ sorted_ids, const int* __restrict__ expert_ids,
               const int* __restrict__ num_tokens_post_padded, const float* __restrict__ a1_scale,
               const float* __restrict__ w13_scale, const float* __restrict__ a2_scale,
               unsigned char* __restrict__ intermediate, int num_tokens, int top_k) {
  using Gemm = MoeGemm<FP8, true, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int a_rows[BLOCK_M];
  __shared__ int slot_of_row[BLOCK_M];
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  int expert = 0;
  if (!moe_gemm_block<BLOCK_M>(sorted_ids, expert_ids, num_tokens_post_padded, num_slots, top_k,
                               a_rows, slot_of_row, expert))
    return;
  const Gemm gemm{hidden, w13, sorted_ids, num_slots, top_k, expert,
                  static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), smem, a_rows};
  float acc[Gemm::k_mi][Gemm::k_ni][4] = {};
  gemm.main_loop(acc);

  float scale = 1.0f, inverse_out = 1.0f;
  if constexpr (FP8) {
    scale = moe_ldg(a1_scale) * moe_ldg(w13_scale + expert);
    inverse_out = div_rn(1.0f, moe_ldg(a2_scale));
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warp_m = warp / WARPS_N;
  const int warp_n = warp % WARPS_N;
#pragma unroll
  for (int mi = 0; mi < Gemm::k_mi; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_m * Gemm::k_warp_m + mi * 16 + (lane >> 2) + half * 8;
      if (slot_of_row[row] < 0)
        continue;
#pragma unroll
      for (int p = 0; p < Gemm::k_ni / 2; ++p) {
        const float g0 = acc[mi][2 * p][2 * half] * scale;
        const float g1 = acc[mi][2 * p][2 * half + 1] * scale;
        const float u0 = acc[mi][2 * p + 1][2 * half] * scale;
        const float u1 = acc[mi][2 * p + 1][2 * half + 1] * scale;
        const float h0 = moe_silu(g0) * u0;
        const float h1 = moe_silu(g1) * u1;
        const int column = static_cast<int>(blockIdx.x) * (BLOCK_N / 2) +
                           (warp_n * (Gemm::k_ni / 2) + p) * 8 + (lane & 3) * 2;
        const long long index =
            moe_intermediate_row<BLOCK_M>(static_cast<int>(blockIdx.y), row) * N + column;
        if constexpr (FP8)
          store_u16(intermediate + index,
                    static_cast<unsigned short>(e4m3x2(h0 * inverse_out, h1 * inverse_out)));
        else
          store_u32(intermediate + index * 2, bf16x2(h0, h1));
      }
    }
}

template <bool FP8, int N, int K, int BLOCK_M, int BLOCK_N, int WARPS_M, int WARPS_N, int STAGES,
          long long NUM_TOKENS_SPEC>
__device__ __forceinline__ void
moe_gemm2_body(const unsigned char* __restrict__ intermediate, const unsigned char* __restrict__ w2,
               const int* __restrict__ sorted_ids, const int* __restrict__ expert_ids,
               const int* __restrict__ num_tokens_post_padded, const float* __restrict__ a2_scale,
               const float* __restrict__ w2_scale, const float* __restrict__ topk_weights,
               unsigned short* __restrict__ slot_out, int num_tokens, int top_k) {
  using Gemm = MoeGemm<FP8, false, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int a_rows[BLOCK_M];
  __shared__ int slot_of_row[BLOCK_M];
  const int num_slots = static_cast<int>(Spec<NUM_TOKENS_SPEC>::value(num_tokens)) * top_k;
  int expert = 0;
  if (!moe_gemm_block<BLOCK_M>(sorted_ids, expert_ids, num_tokens_post_padded, num_slots, 0,
                               a_rows, slot_of_row, expert))
    return;
  const Gemm gemm{intermediate, w2, sorted_ids, num_slots, 0, expert,
                  static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), smem, a_rows};
  float acc[Gemm::k_mi][Gemm::k_ni][4] = {};
  gemm.main_loop(acc);

  float scale = 1.0f;
  if constexpr (FP8)
    scale = moe_ldg(a2_scale) * moe_ldg(w2_scale + expert);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warp_m = warp / WARPS_N;
  const int warp_n = warp % WARPS_N;
#pragma unroll
  for (int mi = 0; mi < Gemm::k_mi; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int slot = slot_of_row[warp_m * Gemm::k_warp_m + mi * 16 + (lane >> 2) + half * 8];
      if (slot < 0)
        continue;
      const float weight = moe_ldg(topk_weights + slot);
#pragma unroll
      for (int ni = 0; ni < Gemm::k_ni; ++ni) {
        const float y0 = mul_rn(acc[mi][ni][2 * half] * scale, weight);
        const float y1 = mul_rn(acc[mi][ni][2 * half + 1] * scale, weight);
        const int column =
            static_cast<int>(blockIdx.x) * BLOCK_N + warp_n * Gemm::k_warp_n + ni * 8 + (lane & 3) * 2;
        store_u32(slot_out + static_cast<long long>(slot) * N + column, bf16x2(y0, y1));
      }
    }
}

// The four entry points: {GEMM1, GEMM2} x {e4m3, bf16}, each taking its GEMM's argument struct
// (moe/gemm_args.h). Dynamic shared memory: STAGES * (BLOCK_M + BLOCK_N) * 128 bytes; block:
// WARPS_M * WARPS_N * 32 threads.
#define SPECJIT_MOE_GEMM_PARAMS                                                                    \
  int N, int K, int BLOCK_M, int BLOCK_N, int WARPS_M, int WARPS_N, int STAGES,                    \
      long long NUM_TOKENS_SPEC
#define SPECJIT_MOE_GEMM1_CALL                                                                     \
  args.hidden, args.w13, args.sorted_ids, args.expert_ids, args.num_post_padded, args.a1_scale,    \
      args.w13_scale, args.a2_scale, args.intermediate, args.num_tokens, args.top_k
#define SPECJIT_MOE_GEMM2_CALL                                                                     \
  args.intermediate, args.w2, args.sorted_ids, args.expert_ids, args.num_post_padded,              \
      args.a2_scale, args.w2_scale, args.topk_weights, args.slot_out, args.num_tokens, args.top_k

template <SPECJIT_MOE_GEMM_PARAMS>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) moe_gemm1_fp8(const MoeMmaGemm1Args args) {
  moe_gemm1_body<true, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_GEMM1_CALL);
}

template <SPECJIT_MOE_GEMM_PARAMS>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    moe_gemm1_bf16(const MoeMmaGemm1Args args) {
  moe_gemm1_body<false, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_GEMM1_CALL);
}

template <SPECJIT_MOE_GEMM_PARAMS>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) moe_gemm2_fp8(const MoeMmaGemm2Args args) {
  moe_gemm2_body<true, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_GEMM2_CALL);
}

template <SPECJIT_MOE_GEMM_PARAMS>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    moe_gemm2_bf16(const MoeMmaGemm2Args args) {
  moe_gemm2_body<false, N, K, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES, NUM_TOKENS_SPEC>(
      SPECJIT_MOE_GEMM2_CALL);
}

#undef SPECJIT_MOE_GEMM_PARAMS
#undef SPECJIT_MOE_GEMM1_CALL
#undef SPECJIT_MOE_GEMM2_CALL

} // namespace specjit_kernels
