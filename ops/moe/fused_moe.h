// The fused Mixture-of-Experts layer (FP8 W8A8 per-tensor, and bf16); the contract is in
// ../shared/KERNELS.md, "Fused MoE", and docs/moe.md:
//
//   route   router_logits f32[T, E] -> softmax -> top-k (highest first, lowest id on ties),
//           weights optionally renormalized to sum to 1: topk_weights f32[T, k], topk_ids i32[T, k]
//   align   slots s = t * k + j grouped by expert, each expert padded to BLOCK_M:
//           sorted_token_ids (padding = T * k, after each expert's slots: the wgmma GEMMs skip a
//           warpgroup whose rows start with padding), expert_ids per block,
//           num_tokens_post_padded [1]
//   gemm1   h = silu(x w1[e]^T) * (x w3[e]^T) with w13[e] = [w1; w3] of [2I, H]; FP8:
//           acc * (a1_scale * w13_scale[e]), then e4m3(h * (1 / a2_scale)) (static scale)
//   gemm2   y = (acc(h w2[e]^T) * (a2_scale * w2_scale[e])) * weight, bf16, per slot [T*k, H]
//   reduce  out[t] = bf16(sum over j of y[t * k + j]) in fp32
//
// Every stage is also an op of its own (runtimes that already route call the later ones).
// num_tokens is never compiled in: the tile configuration comes from its bucket
// (ops/moe/config.h) and is one compiled variant per configuration.
#pragma once

#include "ops/moe/builtin_table.h"
#include "ops/moe/config.h"
#include "runtime/engine.h"
#include "runtime/kernel_def.h"
#include "runtime/tensor.h"

#include <optional>

namespace specjit::ops {

// Kernel definitions (template parameters in order; num_tokens is a dynamic spec word):
//   moe_route<experts, top_k, renormalize, num_tokens>
//   moe_align<experts, block_m, stable, num_tokens>
//   moe_gemm{1,2}_{fp8,bf16}<n, k, block_m, block_n, warps_m, warps_n, stages, num_tokens>
//   moe_wgmma{1,2}_{fp8,bf16}<n, k, orientation, block_m, block_n, warpgroups, stages, split_k,
//                             schedule, tiles, weights, num_tokens>
//     (GEMM1: n = I, k = H; GEMM2: n = H, k = I; orientation, schedule and weights are the
//     enumerations of kernels_src/moe/gemm_args.h)
//   moe_reduce<top_k, num_tokens>
//   moe_tokens_f16<sorted, num_tokens> (FP8 GEMM1 tiles with f16_tokens: the f16 copy of hidden;
//     sorted 2, tiles with sorted_tokens: hidden's e4m3 rows in the slots' sorted order)
//   moe_pack_weights<rows> (rows a dynamic spec word: one variant)
runtime::KernelDef moe_route_kernel();
runtime::KernelDef moe_align_kernel();
runtime::KernelDef moe_gemm_kernel(int gemm, MoeDType dtype, // gemm: 1 or 2
                                   MoeGemmKernel kernel = MoeGemmKernel::mma);
runtime::KernelDef moe_reduce_kernel();
runtime::KernelDef moe_tokens_f16_kernel();
runtime::KernelDef moe_pack_weights_kernel();
std::vector<runtime::KernelDef> moe_kernels(); // all thirteen

// Shape limits the kernels need: experts in [1, 1024], top_k in [1, min(experts, 32)], hidden
// and intermediate multiples of 128 (FP8) / 64 (bf16) values, i.e. of 128 bytes.
llvm::Error check_moe_shape(const MoeShape& shape);

// The caller-provided scratch of fused_moe, carved into 256-byte-aligned regions.
struct MoeWorkspaceLayout {
  size_t topk_weights = 0, topk_ids = 0, sorted_ids = 0, expert_ids = 0, num_post_padded = 0,
         intermediate = 0, slot_out = 0;
  // The GEMM schedules' scratch (16 MB): counter_ints counters (stream-K arrivals, the dynamic
  // schedule's tile counters, the block hand-off's), zeroed by moe_align and left zero by the
  // GEMMs, then the partial sums of stream-K tiles split between CTAs.
  size_t stream_k = 0;
  int64_t counter_ints = 0;
  // FP8: the f16 copy of the tokens that GEMM1 tiles with f16_tokens read (moe_tokens_f16),
  // [tokens_f16_rows, H]: in token order, or (top_k <= 2) in the slots' sorted (padded) order,
  // row p the token of sorted_ids[p].
  size_t tokens_f16 = 0;
  int64_t tokens_f16_rows = 0;
  size_t bytes = 0;       // total
  int64_t max_padded = 0; // capacity of sorted_ids (any block_m <= 256)
};
MoeWorkspaceLayout moe_workspace_layout(const MoeShape& shape, int64_t num_tokens);

// What a caller sets. The tuning and test knobs (stages, a forced configuration, the schedule
// choices) are in ops/moe/tuning.h.
struct FusedMoeOptions {
  bool renormalize = true;
  // The tuned table: by default the built-in one (ops/moe/builtin_table.h); nullptr: the
  // default rule for every shape. A table's entry serves only its arch (and device, where it
  // names one); shapes and devices without an entry get the default rule.
  const MoeConfigTable* table = &builtin_moe_config_table();
  // FP8 GEMM1's accumulation: e4m3 (the default: the table's e4m3 tiles run e4m3 MMAs, as
  // accurate against the layer's float64 truth and up to twice as fast at prefill) or exact
  // (f16 MMAs on exact conversions: bit for bit the re-quantizing reference's intermediate).
  MoeAccumulation accumulation = MoeAccumulation::e4m3;
};

// FusedMoeTensors::weight_layout: how w13 and w2 lie in memory. row_major: as their shapes say.
// packed: each one's bytes as moe_pack_weights writes them (rows of all experts in pieces of 32
// rows x 128 bytes of K, each piece contiguous and already in the order a 128-byte-swizzled TMA
// box lands), which the wgmma GEMMs (sm_90a) read by bulk copies or through a rank-4 map
// (MoePackedReads). The layout also picks the table's entry. A choice for the caller, as the
// packed copy is made at load (what it gains: docs/moe.md, "Packed weights"). The mma.sync GEMMs
// read row-major only.
struct FusedMoeTensors {
  runtime::TensorRef hidden;        // [T, H] e4m3 (fp8) or bf16, 16-byte aligned
  runtime::TensorRef router_logits; // [T, E] f32
  runtime::TensorRef w13;           // [E, 2I, H] e4m3 / bf16 (gate rows, then up rows)
  runtime::TensorRef w2;            // [E, H, I]
  runtime::TensorRef a1_scale;      // fp8: f32[1]; bf16: unused
  runtime::TensorRef w13_scale;     // fp8: f32[E]
  runtime::TensorRef a2_scale;      // fp8: f32[1] (static scale of the intermediate)
  runtime::TensorRef w2_scale;      // fp8: f32[E]
  runtime::TensorRef out;           // [T, H] bf16
  runtime::TensorRef workspace;     // u8[>= moe_workspace_layout(shape, T).bytes], 256-aligned
  MoeWeightLayout weight_layout = MoeWeightLayout::row_major; // of w13 and w2
};

llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& shape,
                      const FusedMoeTensors& tensors, const FusedMoeOptions& options,
                      CUstream stream);

// Packs a weight tensor (w13 [E, 2I, H] or w2 [E, H, I], e4m3 or bf16) into `packed` (same dtype
// and shape, another buffer) for FusedMoeTensors::weight_layout = packed; done once, when the
// weights are loaded. Its last dimension must be a multiple of 128 bytes and its rows (E x its
// second dimension) of 32, as every shape check_moe_shape accepts has them.
llvm::Error moe_pack_weights(runtime::Engine& engine, const runtime::TensorRef& weights,
                             const runtime::TensorRef& packed, CUstream stream);
// Where byte k of row `row` (of all experts' rows, e * N + n) of a weight tensor with rows of
// k_bytes lands in its packed copy: the layout above, for tests and host-side packing.
int64_t moe_packed_weight_offset(int64_t row, int64_t k, int64_t k_bytes);

// The order of an expert's slots in moe_align's sorted_ids (its padding always follows them):
// any (the order an atomic cursor gives, which varies from call to call), or stable (increasing,
// the same grouping every call: what stream-K GEMMs need for run-to-run identical results;
// fused_moe asks for it with them only, as it costs time at decode).
enum class MoeSlotOrder { any, stable };

// Stage ops. topk_ids from elsewhere may be checked on the host (`checked`: copies them and
// rejects ids outside [0, E)); unchecked, the device drops out-of-range ids. moe_align also
// zeroes `zero_counters` (i32, optional: fused_moe passes its workspace's counter_ints counters
// at stream_k; pass them too when aligning for fused_moe's GEMM stages).
llvm::Error moe_route(runtime::Engine& engine, const runtime::TensorRef& router_logits,
                      const runtime::TensorRef& topk_weights, const runtime::TensorRef& topk_ids,
                      bool renormalize, CUstream stream);
llvm::Error moe_align(runtime::Engine& engine, const runtime::TensorRef& topk_ids, int64_t experts,
                      int block_m, const runtime::TensorRef& sorted_ids,
                      const runtime::TensorRef& expert_ids,
                      const runtime::TensorRef& num_post_padded, bool checked, CUstream stream,
                      const runtime::TensorRef& zero_counters = {},
                      MoeSlotOrder order = MoeSlotOrder::any);
// Worst-case padded slot count for `slots` token x k slots over `experts` experts.
int64_t moe_max_padded(int64_t slots, int64_t experts, int block_m);

// Every variant a layer of this shape can need on `target`: every kernel x every bucket's
// configuration (the target and the weights' layout pick the table entry, and the target's SM
// count the default rule's tiles). token_counts restricts the buckets to those counts' buckets.
llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& shape, const FusedMoeOptions& options,
                   const runtime::DeviceFacts& target, llvm::ArrayRef<int64_t> token_counts = {},
                   MoeWeightLayout weights = MoeWeightLayout::row_major);
// The same on `arch`'s documented device (runtime/device_facts.h).
llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& shape, const FusedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts = {},
                   MoeWeightLayout weights = MoeWeightLayout::row_major);

// Makes every variant of fused_moe_variants ready without a GPU.
llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const FusedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts = {},
                  MoeWeightLayout weights = MoeWeightLayout::row_major);

} // namespace specjit::ops
