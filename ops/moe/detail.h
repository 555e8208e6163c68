// Shared by the fused MoE op's files (ops/moe/: fused_moe.cpp, kernels.cpp, stages.cpp,
// gemm_mma.cpp, gemm_wgmma.cpp, plan.cpp, default_rule.cpp, config.cpp); not part of the public
// API.
#pragma once

#include "kernels_src/moe/gemm_args.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"
#include "runtime/tensor.h"

#include <cstdint>

namespace specjit::ops::moe_detail {

using specjit_kernels::MoeOrientation;
using specjit_kernels::MoeWeightReads;

inline constexpr llvm::StringLiteral k_op = "fused_moe";
inline constexpr int k_route_warps = 8;      // kernels_src/moe/route.cu
inline constexpr int k_align_threads = 1024; // kernels_src/moe/align.cu
inline constexpr int k_max_block_m = 256;
inline constexpr int k_min_block_m = 8;      // sizes expert_ids in the workspace
inline constexpr int k_wgmma_min_stages = 3; // config.cpp's rule; the default rule's shallowest
// The f16-token GEMM1 tiles' largest block (config.cpp's rule); sizes their sorted f16 copy
// of the tokens in the workspace (MoeWorkspaceLayout::tokens_f16).
inline constexpr int k_max_f16_tokens_block_m = 128;
// The order of the f16-token GEMM1 tiles' copy of the tokens (moe_tokens_f16; the GEMM1 variant's
// swap_ab value 3 or 2): sorted for models of up to k_f16_tokens_sorted_top_k experts a token,
// token order above. The sorted copy spares GEMM1 its gather (a row's 16 cp.async, 6-13 % of its
// time), but holds top_k rows a token: on the H200, Mixtral (top 2) 5-10 % faster with it,
// Qwen3 and DeepSeek (top 8) 19-28 % slower.
inline constexpr int64_t k_f16_tokens_sorted_top_k = 2;
inline bool f16_tokens_sorted(const MoeShape& s) { return s.top_k <= k_f16_tokens_sorted_top_k; }
inline constexpr int64_t k_max_grid_y = 65535;
inline constexpr int64_t k_max_grid_x = 2147483647;

inline int64_t element_bytes(MoeDType dtype) { return dtype == MoeDType::fp8 ? 1 : 2; }
inline runtime::DType tensor_dtype(MoeDType dtype) {
  return dtype == MoeDType::fp8 ? runtime::DType::e4m3 : runtime::DType::bf16;
}
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A device address as the typed pointer of a kernel argument struct (kernels_src/moe/gemm_args.h).
template <class T> T* device_pointer(CUdeviceptr address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

// The GEMMs' K per pipeline stage and tile row: 128 bytes (128 e4m3 or 64 bf16 values).
inline constexpr unsigned k_moe_row_bytes = 128;

// A GEMM's dynamic shared memory request given its static shared memory: when the two together
// pass 48 KiB but the dynamic part alone does not, the engine would not raise the function's
// dynamic limit and the launch fails (CUDA_ERROR_INVALID_VALUE), so the request becomes just over
// 48 KiB and the limit is raised.
inline unsigned shared_bytes_with_static(unsigned dynamic, unsigned fixed) {
  constexpr unsigned k_default_limit = 48 * 1024;
  if (dynamic <= k_default_limit && dynamic + fixed > k_default_limit)
    return k_default_limit + 16;
  return dynamic;
}

// Index into moe_kernels().
enum KernelIndex {
  k_route,
  k_align,
  k_gemm1_fp8,
  k_gemm1_bf16,
  k_gemm2_fp8,
  k_gemm2_bf16,
  k_reduce,
  k_wgmma1_fp8,
  k_wgmma1_bf16,
  k_wgmma2_fp8,
  k_wgmma2_bf16,
  k_tokens_f16,
  k_pack_weights,
  k_wgmma1_e4m3,
  k_wgmma1_e4m3w,
  k_wgmma2_e4m3w,
  k_kernel_count
};

// Stream-K scratch (kernels_src/moe/wgmma_pipeline.cuh): k_stream_k_max_ctas arrival counters,
// then k_stream_k_slot_floats floats for two slots of partial sums per CTA.
inline constexpr int k_stream_k_max_ctas = 1024;
inline constexpr int64_t k_stream_k_slot_floats = 1024 * 2 * 64 * 32;
// The dynamic schedule's counters follow the stream-K ones: k_scratch_counters in all.
inline constexpr int k_scratch_counters = k_stream_k_max_ctas + 4;
// Then the block hand-off's (GEMM1 -> GEMM2; MoeDependence in kernels_src/moe/wgmma_produce.cuh):
// a count of GEMM2's producers done and a counter per token block; k_scratch_ints ints before
// the slots, all zeroed by align.
inline constexpr int k_handoff_blocks = 4096;
inline constexpr int k_scratch_ints = k_scratch_counters + 1 + k_handoff_blocks;
inline constexpr size_t k_stream_k_scratch_bytes =
    size_t{k_scratch_ints} * 4 + size_t{k_stream_k_slot_floats} * 4;

// A grid-stride launch of 256-thread CTAs over `items` (moe_tokens_f16, moe_reduce,
// moe_pack_weights): one item a thread, at most `per_sm` CTAs an SM of a device of
// `multiprocessors` SMs (the kernels loop over the rest).
runtime::LaunchConfig grid_stride_launch(int64_t items, int64_t per_sm, int multiprocessors,
                                         CUstream stream);

// Whether a wgmma tile reads packed weights by bulk copies (else through a rank-4 tensor map);
// see kernels.cpp.
bool packed_bulk_reads(const GemmTile& tile);

// GEMM2's block hand-off target for this call (0: none); see fused_moe.cpp.
int handoff_target(const MoeShape& s, int64_t tokens, const MoeTileConfig& config,
                   const MoeTuning& options, int64_t blocks);

// The wgmma GEMMs' launch order on the fixed schedule (moe_wgmma_setup) as blocks per group:
// 1 (block-major) or 8 (grouped); MoeTuning::launch_order, automatic: block-major for FP8
// when GEMM2 takes blocks as they complete (`handoff`: the call's handoff_target is not 0),
// there are at most 8 experts and the routed tokens fill at most one block each, so that each
// block is complete early and GEMM2 can take it. Without the hand-off the order only decides
// which CTAs share weight tiles in L2, which grouped does better.
int group_blocks(const MoeShape& s, int64_t tokens, int block_m, bool handoff,
                 MoeLaunchOrder order = MoeLaunchOrder::automatic);
// The grouped order's blocks per group; the fixed grid rounds its blocks up to a multiple of it
// (wgmma_ctas), so that both orders' groups divide the grid.
inline constexpr int k_grouped_blocks = 8;

// The call's slot order (moe_align): stable with a stream-K GEMM, whose sums' last bits depend
// on the token block a row falls in; the other schedules compute each row alone, so their
// results are the same from call to call in any order.
inline MoeSlotOrder moe_slot_order(const MoeTileConfig& config) {
  return config.gemm1.stream_k() || config.gemm2.stream_k() ? MoeSlotOrder::stable
                                                            : MoeSlotOrder::any;
}

// Kernel ids per engine, remembered per thread (see inv_rope_fp8_quant.cpp's register_kernel).
llvm::Expected<runtime::KernelId> kernel_id(runtime::Engine& engine, KernelIndex index);

KernelIndex gemm_index(int gemm, MoeDType dtype, MoeGemmKernel kernel, bool e4m3 = false,
                       bool whole_k = false);

// A GEMM family's kernel definition: moe_<family><gemm>_<dtype> (e.g. moe_wgmma1_fp8), the
// template function of that name in the embedded `source`, with the template parameters
// <n, k, tile..., num_tokens>: n and k compiled in (raw), then `tile`, then the token count
// (a dynamic spec word).
runtime::KernelDef gemm_kernel_def(llvm::StringRef family, int gemm, MoeDType dtype,
                                   std::string source, std::vector<runtime::ParamDef> tile);

// The template values of moe_route (moe_route_kernel), and its launch: one warp a token.
std::vector<int64_t> route_values(int64_t experts, int64_t top_k, bool renormalize,
                                  int64_t num_tokens);
llvm::Error launch_route(runtime::Engine& engine, llvm::ArrayRef<int64_t> values,
                         CUdeviceptr logits, CUdeviceptr topk_weights, CUdeviceptr topk_ids,
                         int64_t tokens, CUstream stream);
// moe_align's launch: one CTA; it zeroes `counters` ints at zero_counters (0: none).
llvm::Error launch_align(runtime::Engine& engine, llvm::ArrayRef<int64_t> values,
                         CUdeviceptr topk_ids, CUdeviceptr sorted_ids, CUdeviceptr expert_ids,
                         CUdeviceptr num_post_padded, CUdeviceptr zero_counters, int64_t counters,
                         int64_t tokens, int64_t top_k, CUstream stream);
// The template values of moe_align (moe_align_kernel), for its launch and the manifest's variants.
std::vector<int64_t> align_values(int64_t experts, int block_m, MoeSlotOrder order,
                                  int64_t num_tokens);
// The template values of moe_tokens_f16 (moe_tokens_f16_kernel): the copy's order by
// f16_tokens_sorted, or sorted_e4m3 (GEMM1 tiles with sorted_tokens: the e4m3 bytes in sorted
// order), for its launch and the manifest's variants.
std::vector<int64_t> tokens_f16_values(const MoeShape& shape, int64_t num_tokens,
                                       bool sorted_e4m3 = false);
// How a wgmma GEMM's producer reads the weights (MoeWeights in
// kernels_src/moe/wgmma_produce.cuh): row-major through a rank-3 tensor map, or packed by bulk
// copies or through a rank-4 map: `reads` (the call's MoeTuning), or where that is
// automatic the tile's own (a table's "reads"), or where that is too packed_bulk_reads.
MoeWeightReads weight_reads(const GemmTile& tile, MoeWeightLayout layout, MoePackedReads reads);

// The device addresses of one fused_moe call: its tensors and its workspace's regions.
struct MoeBuffers {
  CUdeviceptr hidden = 0, router_logits = 0, w13 = 0, w2 = 0, a1_scale = 0, w13_scale = 0,
              a2_scale = 0, w2_scale = 0, out = 0;
  CUdeviceptr topk_weights = 0, topk_ids = 0, sorted_ids = 0, expert_ids = 0, num_post_padded = 0,
              intermediate = 0, slot_out = 0, scratch = 0, tokens_f16 = 0;
  int64_t max_padded = 0;      // capacity of sorted_ids
  int64_t counter_ints = 0;    // the scratch's counters, zeroed by moe_align
  int64_t tokens_f16_rows = 0; // rows of the f16 copy of the tokens
  static MoeBuffers of(const FusedMoeTensors& t, const MoeWorkspaceLayout& l);
};

// The arguments both GEMM kernel families' GEMM1 (GEMM2) take alike, from `b`; each family's
// args then add their own (weights, maps, hand-off).
template <class Args>
void fill_gemm1_args(Args& args, const MoeShape& s, const MoeBuffers& b, int64_t tokens) {
  args.sorted_ids = device_pointer<const int>(b.sorted_ids);
  args.expert_ids = device_pointer<const int>(b.expert_ids);
  args.num_post_padded = device_pointer<const int>(b.num_post_padded);
  args.a1_scale = device_pointer<const float>(b.a1_scale);
  args.w13_scale = device_pointer<const float>(b.w13_scale);
  args.a2_scale = device_pointer<const float>(b.a2_scale);
  args.intermediate = device_pointer<unsigned char>(b.intermediate);
  args.num_tokens = static_cast<int>(tokens);
  args.top_k = static_cast<int>(s.top_k);
}
template <class Args>
void fill_gemm2_args(Args& args, const MoeShape& s, const MoeBuffers& b, int64_t tokens) {
  args.sorted_ids = device_pointer<const int>(b.sorted_ids);
  args.expert_ids = device_pointer<const int>(b.expert_ids);
  args.num_post_padded = device_pointer<const int>(b.num_post_padded);
  args.a2_scale = device_pointer<const float>(b.a2_scale);
  args.w2_scale = device_pointer<const float>(b.w2_scale);
  args.topk_weights = device_pointer<const float>(b.topk_weights);
  args.slot_out = device_pointer<unsigned short>(b.slot_out);
  args.num_tokens = static_cast<int>(tokens);
  args.top_k = static_cast<int>(s.top_k);
}

// Looks the variant up, loading it on first use.
llvm::Expected<const runtime::Variant*> get_variant(runtime::Engine& engine, KernelIndex index,
                                                    llvm::ArrayRef<int64_t> values);

// Looks the variant up and launches it with `args`.
llvm::Error launch_variant(runtime::Engine& engine, KernelIndex index,
                           llvm::ArrayRef<int64_t> values, const runtime::LaunchConfig& config,
                           const auto&... args) {
  auto variant = get_variant(engine, index, values);
  if (!variant)
    return variant.takeError();
  return engine.launch(**variant, config, args...);
}

// expect_tensor with the op's name (fused_moe's, or a stage op's: moe_route, moe_align).
llvm::Error expect(llvm::StringRef argument, const runtime::TensorRef& tensor, runtime::DType dtype,
                   llvm::ArrayRef<int64_t> shape, size_t alignment, llvm::StringRef op = k_op);
// A 1-D tensor of at least `minimum` elements.
llvm::Error expect_capacity(llvm::StringRef argument, const runtime::TensorRef& tensor,
                            runtime::DType dtype, int64_t minimum, size_t alignment,
                            llvm::StringRef op = k_op);
// check_moe_shape, its errors under `op`'s name.
llvm::Error check_moe_shape(const MoeShape& shape, llvm::StringRef op);

} // namespace specjit::ops::moe_detail
