// The fused MoE layer's kernel definitions and the helpers its op files share.
#include "runtime/ops/moe_detail.h"

#include "support/error.h"

#include <fmt/format.h>

#include <array>

namespace specjit::ops {

using runtime::DType;
using runtime::KernelDef;
using runtime::ParamDef;
using runtime::ParamEncoding;
using runtime::Policy;
using runtime::TensorRef;

namespace {
ParamDef raw(const char* name) { return {name, Policy::exact(), ParamEncoding::raw}; }
ParamDef tokens() { return {"num_tokens", Policy::dynamic(), ParamEncoding::spec_word}; }
} // namespace

KernelDef moe_route_kernel() {
  return {"moe_route", "moe/route.cu", "specjit_kernels::moe_route",
          {raw("experts"), raw("top_k"), raw("renormalize"), tokens()}, {}};
}

KernelDef moe_align_kernel() {
  return {"moe_align",
          "moe/align.cu",
          "specjit_kernels::moe_align",
          {raw("experts"), raw("block_m"), raw("stable"), tokens()},
          {}};
}

KernelDef moe_gemm_kernel(int gemm, MoeDType dtype, MoeGemmKernel kernel) {
  if (kernel == MoeGemmKernel::wgmma) {
    std::string name = fmt::format("moe_wgmma{}_{}", gemm, moe_dtype_name(dtype).str());
    return {name,
            "moe/gemm_wgmma.cu",
            "specjit_kernels::" + name,
            {raw("n"), raw("k"), raw("swap_ab"), raw("block_m"), raw("block_n"), raw("warpgroups"),
             raw("stages"), raw("split_k"), raw("tiles"), raw("weights"), tokens()},
            {}};
  }
  std::string name = fmt::format("moe_gemm{}_{}", gemm, moe_dtype_name(dtype).str());
  return {name,
          "moe/gemm.cu",
          "specjit_kernels::" + name,
          {raw("n"), raw("k"), raw("block_m"), raw("block_n"), raw("warps_m"), raw("warps_n"),
           raw("stages"), tokens()},
          {}};
}

KernelDef moe_reduce_kernel() {
  return {"moe_reduce", "moe/reduce.cu", "specjit_kernels::moe_reduce", {raw("top_k"), tokens()},
          {}};
}

KernelDef moe_tokens_f16_kernel() {
  return {"moe_tokens_f16",
          "moe/tokens_f16.cu",
          "specjit_kernels::moe_tokens_f16",
          {raw("sorted"), tokens()},
          {}};
}

KernelDef moe_pack_weights_kernel() {
  return {"moe_pack_weights",
          "moe/pack_weights.cu",
          "specjit_kernels::moe_pack_weights",
          {{"rows", Policy::dynamic(), ParamEncoding::spec_word}},
          {}};
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
          moe_pack_weights_kernel()};
}

namespace moe_detail {

llvm::Expected<runtime::KernelId> kernel_id(runtime::Engine& engine, KernelIndex index) {
  thread_local uint64_t cached_engine = 0;
  thread_local std::array<runtime::KernelId, k_kernel_count> ids;
  if (cached_engine != engine.instance_id()) {
    static const std::vector<KernelDef> defs = moe_kernels();
    for (size_t i = 0; i < defs.size(); ++i) {
      auto id = engine.add_kernel(defs[i]);
      if (!id)
        return id.takeError();
      ids[i] = *id;
    }
    cached_engine = engine.instance_id();
  }
  return ids[index];
}

llvm::Expected<const runtime::Variant*> get_variant(runtime::Engine& engine, KernelIndex index,
                                                    llvm::ArrayRef<int64_t> values) {
  auto id = kernel_id(engine, index);
  if (!id)
    return id.takeError();
  return engine.get(*id, values);
}

KernelIndex gemm_index(int gemm, MoeDType dtype, MoeGemmKernel kernel) {
  const bool fp8 = dtype == MoeDType::fp8;
  if (kernel == MoeGemmKernel::wgmma) {
    if (gemm == 1)
      return fp8 ? k_wgmma1_fp8 : k_wgmma1_bf16;
    return fp8 ? k_wgmma2_fp8 : k_wgmma2_bf16;
  }
  if (gemm == 1)
    return fp8 ? k_gemm1_fp8 : k_gemm1_bf16;
  return fp8 ? k_gemm2_fp8 : k_gemm2_bf16;
}

std::vector<int64_t> align_values(int64_t experts, int block_m, MoeSlotOrder order,
                                  int64_t num_tokens) {
  return {experts, block_m, order == MoeSlotOrder::stable ? 1 : 0, num_tokens};
}

std::vector<int64_t> tokens_f16_values(const MoeShape& shape, int64_t num_tokens) {
  return {f16_tokens_sorted(shape) ? 1 : 0, num_tokens};
}

int weight_reads(const GemmTile& tile, MoeWeightLayout layout, MoePackedReads reads) {
  if (layout == MoeWeightLayout::row_major)
    return 0;
  if (reads == MoePackedReads::automatic) // the call's choice, else the table's, else the rule
    reads = tile.packed_reads;
  const bool bulk =
      reads == MoePackedReads::automatic ? packed_bulk_reads(tile) : reads == MoePackedReads::bulk;
  return bulk ? 1 : 2;
}

std::vector<int64_t> gemm_values(const MoeShape& shape, int gemm, int block_m, const GemmTile& t,
                                 int64_t num_tokens, int weights) {
  const int64_t n = gemm == 1 ? shape.intermediate : shape.hidden;
  const int64_t k = gemm == 1 ? shape.hidden : shape.intermediate;
  if (t.kernel == MoeGemmKernel::wgmma)
    return {
        n,        k,         !t.f16_tokens ? (t.swap_ab ? 1 : 0) : f16_tokens_sorted(shape) ? 3 : 2,
        block_m,  t.block_n, t.warpgroups,
        t.stages, t.split_k, t.stream_k() ? 0 : t.dynamic() ? k_tiles_dynamic : t.tiles,
        weights,  num_tokens}; // tiles 0: stream-K, k_tiles_dynamic: dynamic
  return {n, k, block_m, t.block_n, t.warps_m, t.warps_n, t.stages, num_tokens};
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
