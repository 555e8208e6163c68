// The launch interface of the MoE GEMM kernels, read by both sides of NVRTC: the host compiler
// (ops/moe/gemm_mma.cpp, gemm_wgmma.cpp) and the kernels (moe/gemm.cu,
// moe/gemm_wgmma.cu). Each kernel takes one argument, the plain-data struct of its family and
// GEMM below, so the host fills fields by name and the engine checks the struct's size; the
// variant choices a kernel is compiled for are the enums below, template arguments spelled by
// name. Plain C++ with no CUDA header; pointers are device addresses.
#pragma once

#include "../common/tma_desc.h"

namespace specjit_kernels {

// How a wgmma GEMM's tile maps tokens and weights onto the MMA (template argument ORIENTATION).
// normal: the token rows are wgmma's M (64 a warpgroup), the weight rows its N: many tokens an
// expert. swap_ab: 64 weight rows are M, the block's tokens N: few tokens an expert.
// swap_ab_f16_tokens / swap_ab_f16_sorted (FP8 GEMM1): swap-AB reading a copy of the tokens
// converted to f16 once per call (moe/tokens_f16.cu), in token order (gathered) or in the slots'
// sorted order (TMA boxes). normal_sorted (FP8 GEMM1 on e4m3 tensor cores, top_k <= 2): normal,
// its token rows from an e4m3 copy in the slots' sorted order (moe/tokens_f16.cu, SORTED 2), one
// TMA box a stage instead of a gather. The values are the names' order; the host spells them by
// name.
enum class MoeOrientation : int {
  normal = 0,
  swap_ab = 1,
  swap_ab_f16_tokens = 2,
  swap_ab_f16_sorted = 3,
  normal_sorted = 4,
};

// How a wgmma GEMM's CTAs share the work (template argument SCHEDULE). fixed: one CTA per
// (token block, TILES weight tiles, split-K part), launched for the worst case. stream_k and
// dynamic, the persistent schedules: as many CTAs as the device holds at once, taking equal
// shares of all K stages (stream_k) or whole tiles from a counter (dynamic); TILES is 1.
enum class MoeSchedule : int {
  fixed = 0,
  stream_k = 1,
  dynamic = 2,
};

// How a wgmma GEMM's producer reads the weights (template argument WEIGHTS; moe/wgmma_produce.cuh,
// MoeWeights): the row-major tensor through a rank-3 tensor map, the packed copy
// (moe/pack_weights.cu) by bulk copies, or the packed copy through a rank-4 tensor map.
enum class MoeWeightReads : int {
  row_major_map = 0,
  packed_bulk = 1,
  packed_map = 2,
};

// ---- mma.sync GEMMs (moe/gemm.cu: moe_gemm1_{fp8,bf16}, moe_gemm2_{fp8,bf16}) ----

struct MoeMmaGemm1Args {
  const unsigned char* hidden; // [T, K] e4m3 / bf16
  const unsigned char* w13;    // [E, 2N, K], gate rows then up rows
  const int* sorted_ids;       // the slots grouped by expert, padded (moe_align)
  const int* expert_ids;       // per token block
  const int* num_post_padded;  // [1]
  const float* a1_scale;       // FP8: [1]
  const float* w13_scale;      // FP8: [E]
  const float* a2_scale;       // FP8: [1], the intermediate's static scale
  unsigned char* intermediate; // [max padded, N], in sorted order
  int num_tokens;
  int top_k;
};

struct MoeMmaGemm2Args {
  const unsigned char* intermediate; // [max padded, K], in sorted order
  const unsigned char* w2;           // [E, N, K]
  const int* sorted_ids;
  const int* expert_ids;
  const int* num_post_padded;
  const float* a2_scale;     // FP8: [1]
  const float* w2_scale;     // FP8: [E]
  const float* topk_weights; // [T * top_k]
  unsigned short* slot_out;  // [T * top_k, N] bf16
  int num_tokens;
  int top_k;
};

// ---- wgmma GEMMs (moe/gemm_wgmma.cu: moe_wgmma1_{fp8,bf16}, moe_wgmma2_{fp8,bf16}) ----
// The tensor maps come first: a __grid_constant__ argument keeps them in parameter space, where
// TMA reads them.

struct MoeWgmmaGemm1Args {
  // The weights: rank 3 over the row-major bytes {K bytes, 2N rows, E} (row_major_map), or rank
  // 4 over the packed copy (packed_map); boxes of 128 bytes x the stage's gate (or up) rows.
  TmaDesc w13_map;
  // swap_ab_f16_sorted: the f16 copy of the tokens in sorted order {2K bytes, rows, 1}, boxes of
  // 128 bytes x TOK rows; any valid map for the other orientations (they do not read it).
  TmaDesc tokens_map;
  const unsigned char* hidden; // [T, K] e4m3 / bf16, or (swap_ab_f16_tokens) the f16 copy
  const int* sorted_ids;
  const int* expert_ids;
  const int* num_post_padded;
  const float* a1_scale;
  const float* w13_scale;
  const float* a2_scale;
  unsigned char* intermediate;
  unsigned char* scratch; // the workspace's counters and stream-K partial sums
  int handoff;            // 1: count each token block done for GEMM2's block hand-off
  int group_blocks;       // launch order of the fixed schedule: 1 block-major, 8 grouped
  int num_tokens;
  int top_k;
  const unsigned char* w13_packed; // packed_bulk: the packed copy's address
};

struct MoeWgmmaGemm2Args {
  TmaDesc w2_map;           // as GEMM1's w13_map, over w2 {K bytes, N rows, E}
  TmaDesc intermediate_map; // {K bytes, max padded rows, 1}, boxes of 128 bytes x TOK rows
  const int* sorted_ids;
  const int* expert_ids;
  const int* num_post_padded;
  const float* a2_scale;
  const float* w2_scale;
  const float* topk_weights;
  unsigned short* slot_out;
  unsigned char* scratch;
  int handoff_target; // > 0: wait for each token block's GEMM1 count to reach it (hand-off)
  int group_blocks;
  int num_tokens;
  int top_k;
  const unsigned char* w2_packed;
};

// The structs' sizes, which the engine checks at every launch against the kernel's parameter,
// and the tensor maps' places, which both compilers must agree on.
static_assert(sizeof(MoeMmaGemm1Args) == 80 && sizeof(MoeMmaGemm2Args) == 80,
              "mma.sync GEMM arguments: 9 pointers and 2 ints");
static_assert(sizeof(MoeWgmmaGemm1Args) == 384 && sizeof(MoeWgmmaGemm2Args) == 384,
              "wgmma GEMM arguments: 2 tensor maps, pointers and ints, 64-byte aligned");
static_assert(alignof(MoeWgmmaGemm1Args) == 64 && alignof(MoeWgmmaGemm2Args) == 64,
              "tensor maps are 64-byte aligned");

} // namespace specjit_kernels
