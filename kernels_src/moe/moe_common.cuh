// Warp and shared-memory helpers of the MoE kernels (integer shuffles, shared atomics), as PTX:
// NVRTC has no built-in headers. The float butterfly shuffle is common/bf16.cuh's shfl_xor.
#pragma once

#include "common/mma.cuh"

namespace specjit_kernels {

// Packed weights (moe/pack_weights.cu, MoeWeights in moe/wgmma_pipeline.cuh): pieces of this many
// rows x 128 bytes of K (the host's k_moe_piece_rows, ops/moe/config.h).
inline constexpr int k_moe_piece_rows = 32;
inline constexpr int k_moe_piece_bytes = k_moe_piece_rows * 128;

// A read-only load through the read-only data path (ld.global.nc), for the routing arrays and
// scales the GEMMs read: their pointers arrive in an argument struct (moe/gemm_args.h), whose
// members carry no __restrict__, so the compiler cannot infer the path as it did for restrict
// kernel parameters. Not volatile and without a memory clobber, so that the compiler may merge,
// hoist and drop these loads as it does inferred ones; only for memory no kernel of the call
// writes while the GEMM runs.
__device__ __forceinline__ int moe_ldg(const int* p) {
  int v;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float moe_ldg(const float* p) {
  float v;
  asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ int shfl_xor_i32(int value, int lane_mask) {
  int result;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(result)
               : "r"(value), "r"(lane_mask));
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

// Bit l set for each lane l whose `predicate` holds.
__device__ __forceinline__ unsigned ballot(bool predicate) {
  unsigned mask;
  asm volatile("{\n.reg .pred p;\n"
               "setp.ne.u32 p, %1, 0;\n"
               "vote.sync.ballot.b32 %0, p, 0xffffffff;\n}\n"
               : "=r"(mask)
               : "r"(static_cast<unsigned>(predicate)));
  return mask;
}

// SiLU of the gated GEMM1 epilogue (x / (1 + e^-x)), shared by the mma.sync and wgmma GEMMs.
// Both steps approximate (a few ulp; the reference computes it in fp32 with std::exp): for
// x < -88, e^-x is inf and the result -0.
__device__ __forceinline__ float moe_silu(float x) { return x * rcp_approx(1.0f + exp_approx(-x)); }

// A sorted entry as a row's slot: itself if it names one of the call's num_slots slots, else -1
// (padding).
__device__ __forceinline__ int moe_slot_or_padding(int sorted_id, int num_slots) {
  return sorted_id >= 0 && sorted_id < num_slots ? sorted_id : -1;
}

// The rows of block m_block of BLOCK_M sorted slots: slot_of_row[r] (-1 for padding) and
// a_rows[r], the row of A: slot / a_row_divisor (GEMM1: the slot's token), or with
// a_row_divisor 0 the row's sorted position (GEMM2: GEMM1 writes the intermediate in sorted
// order, see moe_intermediate_row). Rows first, first + step, ... by this thread; either output
// may be null.
template <int BLOCK_M>
__device__ __forceinline__ void moe_block_rows_by(const int* sorted_ids, int m_block, int num_slots,
                                                  int a_row_divisor, int* a_rows, int* slot_of_row,
                                                  int first, int step) {
  for (int r = first; r < BLOCK_M; r += step) {
    const int slot = moe_slot_or_padding(moe_ldg(sorted_ids + m_block * BLOCK_M + r), num_slots);
    if (slot_of_row != nullptr)
      slot_of_row[r] = slot;
    if (a_rows != nullptr)
      a_rows[r] = slot < 0 ? -1 : a_row_divisor == 0 ? m_block * BLOCK_M + r : slot / a_row_divisor;
  }
}
// The same, filled by the whole CTA.
template <int BLOCK_M>
__device__ __forceinline__ void moe_block_rows(const int* sorted_ids, int m_block, int num_slots,
                                               int a_row_divisor, int* a_rows, int* slot_of_row) {
  moe_block_rows_by<BLOCK_M>(sorted_ids, m_block, num_slots, a_row_divisor, a_rows, slot_of_row,
                             static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

// The rows of a block up to its last slot (slot_of_row filled and visible; called by whole
// warps): every row past this count is padding, whatever the order of slots and padding.
// (moe_align puts the slots first, so with it the count is the block's number of slots.)
template <int BLOCK_M> __device__ __forceinline__ int moe_used_rows(const int* slot_of_row) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  int used = 0;
#pragma unroll
  for (int r0 = 0; r0 < BLOCK_M; r0 += 32) {
    const unsigned mask = ballot(r0 + lane < BLOCK_M && slot_of_row[r0 + lane] >= 0);
    if (mask != 0)
      used = r0 + 32 - count_leading_zeros(mask);
  }
  return used;
}

// The intermediate [max padded, I] is stored in the sorted (padded) order of the slots: row r of
// token block m_block lives at row m_block * BLOCK_M + r, so GEMM2 reads its A tile as one
// contiguous box (TMA) instead of gathering rows by slot. Padding rows are never written; the
// wgmma GEMM2 loads them with the box, and their products land only in padding outputs, which
// its epilogue skips.
template <int BLOCK_M>
__device__ __forceinline__ long long moe_intermediate_row(int m_block, int r) {
  return static_cast<long long>(m_block) * BLOCK_M + r;
}

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
