// The fused MoE layer's kernel definitions and the helpers its op files share.
#include "ops/common/kernel_defs.h"
#include "ops/common/kernel_ids.h"
#include "ops/moe/detail.h"
#include "ops/moe/gemm_mma.h"
#include "ops/moe/gemm_wgmma.h"

#include "support/error.h"

#include <fmt/format.h>

namespace specjit::ops {

using common::builtin_kernel;
using common::raw_param;
using common::tokens_param;
using runtime::DType;
using runtime::KernelDef;
using runtime::TensorRef;

KernelDef moe_route_kernel() {
  return builtin_kernel(
      "moe_route", "moe/route.cu",
      {raw_param("experts"), raw_param("top_k"), raw_param("renormalize"), tokens_param()});
}

KernelDef moe_align_kernel() {
  return builtin_kernel(
      "moe_align", "moe/align.cu",
      {raw_param("experts"), raw_param("block_m"), raw_param("stable"), tokens_param()});
}

KernelDef moe_gemm_kernel(int gemm, MoeDType dtype, MoeGemmKernel kernel) {
  return kernel == MoeGemmKernel::wgmma ? moe_detail::wgmma_gemm_kernel(gemm, dtype)
                                        : moe_detail::mma_gemm_kernel(gemm, dtype);
}

KernelDef moe_reduce_kernel() {
  return builtin_kernel("moe_reduce", "moe/reduce.cu", {raw_param("top_k"), tokens_param()});
}

KernelDef moe_tokens_f16_kernel() {
  return builtin_kernel("moe_tokens_f16", "moe/tokens_f16.cu",
                        {raw_param("sorted"), tokens_param()});
}

KernelDef moe_pack_weights_kernel() {
  return builtin_kernel("moe_pack_weights", "moe/pack_weights.cu", {common::spec_param("rows")});
}

std::vector<KernelDef> moe_kernels() {
  return {moe_route_kernel(),
          moe_align_kernel(),
          moe_gemm_kernel(1, MoeDType::fp8),
          moe_gemm_kernel(1, MoeDType::bf16),
          moe_gemm_kernel(2, MoeDType::fp8),
          moe_gemm_kernel(2, MoeDType::bf16),
          moe_reduce_kernel(),
          moe_gemm_kernel(1, MoeDType::fp8, MoeGemmKernel::wgmma),
          moe_gemm_kernel(1, MoeDType::bf16, MoeGemmKernel::wgmma),
          moe_gemm_kernel(2, MoeDType::fp8, MoeGemmKernel::wgmma),
          moe_gemm_kernel(2, MoeDType::bf16, MoeGemmKernel::wgmma),
          moe_tokens_f16_kernel(),
          moe_pack_weights_kernel(),
          moe_detail::wgmma_gemm_kernel(1, MoeDType::fp8, true),
          moe_detail::wgmma_gemm_kernel(1, MoeDType::fp8, true, true),
          moe_detail::wgmma_gemm_kernel(2, MoeDType::fp8, false, true)};
}

namespace moe_detail {

llvm::Expected<runtime::KernelId> kernel_id(runtime::Engine& engine, KernelIndex index) {
  thread_local common::KernelIds<k_kernel_count> ids;
  return ids.get(engine, index, [] {
    static const std::vector<KernelDef> defs = moe_kernels();
    return llvm::ArrayRef<KernelDef>(defs);
  });
}

llvm::Expected<const runtime::Variant*> get_variant(runtime::Engine& engine, KernelIndex index,
                                                    llvm::ArrayRef<int64_t> values) {
  auto id = kernel_id(engine, index);
  if (!id)
    return id.takeError();
  return engine.get(*id, values);
}

KernelIndex gemm_index(int gemm, MoeDType dtype, MoeGemmKernel kernel, bool e4m3, bool whole_k) {
  const bool fp8 = dtype == MoeDType::fp8;
  if (kernel == MoeGemmKernel::wgmma) {
    if (gemm == 1)
      return !fp8 ? k_wgmma1_bf16 : !e4m3 ? k_wgmma1_fp8 : whole_k ? k_wgmma1_e4m3w : k_wgmma1_e4m3;
    return !fp8 ? k_wgmma2_bf16 : whole_k ? k_wgmma2_e4m3w : k_wgmma2_fp8;
  }
  if (gemm == 1)
    return fp8 ? k_gemm1_fp8 : k_gemm1_bf16;
  return fp8 ? k_gemm2_fp8 : k_gemm2_bf16;
}

KernelDef gemm_kernel_def(llvm::StringRef family, int gemm, MoeDType dtype, std::string source,
                          std::vector<runtime::ParamDef> tile) {
  std::vector<runtime::ParamDef> params = {raw_param("n"), raw_param("k")};
  for (runtime::ParamDef& param : tile)
    params.push_back(std::move(param));
  params.push_back(tokens_param());
  return builtin_kernel(fmt::format("moe_{}{}_{}", family.str(), gemm, moe_dtype_name(dtype).str()),
                        std::move(source), std::move(params));
}

std::vector<int64_t> align_values(int64_t experts, int block_m, MoeSlotOrder order,
                                  int64_t num_tokens) {
  return {experts, block_m, order == MoeSlotOrder::stable ? 1 : 0, num_tokens};
}

std::vector<int64_t> tokens_f16_values(const MoeShape& shape, int64_t num_tokens,
                                       bool sorted_e4m3) {
  return {sorted_e4m3 ? 2 : f16_tokens_sorted(shape) ? 1 : 0, num_tokens};
}

// Measured on the H200 with the weights packed (docs/moe.md, "Packed weights"), each GEMM
// alone against the same tile reading row-major weights by tensor map: bulk copies
// 2-5 % faster for the swap-AB tiles of decode; the f16-token GEMM1 and the normal orientation
// (8 pieces a stage, weights mostly from L2) up to 13 % slower, so they read the packed copy
// through a tensor map.
bool packed_bulk_reads(const GemmTile& tile) { return tile.swap_ab && !tile.f16_tokens; }

MoeWeightReads weight_reads(const GemmTile& tile, MoeWeightLayout layout, MoePackedReads reads) {
  if (layout == MoeWeightLayout::row_major)
    return MoeWeightReads::row_major_map;
  if (reads == MoePackedReads::automatic) // the call's choice, else the table's, else the rule
    reads = tile.packed_reads;
  const bool bulk =
      reads == MoePackedReads::automatic ? packed_bulk_reads(tile) : reads == MoePackedReads::bulk;
  return bulk ? MoeWeightReads::packed_bulk : MoeWeightReads::packed_map;
}

MoeBuffers MoeBuffers::of(const FusedMoeTensors& t, const MoeWorkspaceLayout& l) {
  const CUdeviceptr w = t.workspace.data;
  MoeBuffers b;
  b.hidden = t.hidden.data;
  b.router_logits = t.router_logits.data;
  b.w13 = t.w13.data;
  b.w2 = t.w2.data;
  b.a1_scale = t.a1_scale.data;
  b.w13_scale = t.w13_scale.data;
  b.a2_scale = t.a2_scale.data;
  b.w2_scale = t.w2_scale.data;
  b.out = t.out.data;
  b.topk_weights = w + l.topk_weights;
  b.topk_ids = w + l.topk_ids;
  b.sorted_ids = w + l.sorted_ids;
  b.expert_ids = w + l.expert_ids;
  b.num_post_padded = w + l.num_post_padded;
  b.intermediate = w + l.intermediate;
  b.slot_out = w + l.slot_out;
  b.scratch = w + l.stream_k;
  b.tokens_f16 = w + l.tokens_f16;
  b.max_padded = l.max_padded;
  b.counter_ints = l.counter_ints;
  b.tokens_f16_rows = l.tokens_f16_rows;
  return b;
}

llvm::Error expect(llvm::StringRef argument, const TensorRef& tensor, DType dtype,
                   llvm::ArrayRef<int64_t> shape, size_t alignment, llvm::StringRef op) {
  return runtime::expect_tensor(op, argument, tensor, dtype, shape, alignment);
}

llvm::Error expect_capacity(llvm::StringRef argument, const TensorRef& tensor, DType dtype,
                            int64_t minimum, size_t alignment, llvm::StringRef op) {
  if (auto err = expect(argument, tensor, dtype, {-1}, alignment, op))
    return err;
  if (tensor.shape[0] < minimum)
    return make_error(Errc::invalid_argument, "{}: {}: needs at least {} elements, got {}",
                      op.str(), argument.str(), minimum, tensor.describe());
  return llvm::Error::success();
}

} // namespace moe_detail

} // namespace specjit::ops
