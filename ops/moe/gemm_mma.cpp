#include "ops/moe/gemm_mma.h"

#include "ops/common/kernel_defs.h"

namespace specjit::ops::moe_detail {

MmaGemm MmaGemm::of(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile) {
  MmaGemm g;
  g.gemm = gemm;
  g.dtype = shape.dtype;
  g.n = gemm == 1 ? shape.intermediate : shape.hidden;
  g.k = gemm == 1 ? shape.hidden : shape.intermediate;
  g.block_m = block_m;
  g.block_n = tile.block_n;
  g.warps_m = tile.warps_m;
  g.warps_n = tile.warps_n;
  g.stages = tile.stages;
  return g;
}

std::vector<int64_t> MmaGemm::values(int64_t num_tokens) const {
  return {n, k, block_m, block_n, warps_m, warps_n, stages, num_tokens};
}

unsigned MmaGemm::shared_bytes() const {
  const unsigned dynamic =
      static_cast<unsigned>(stages) * static_cast<unsigned>(block_m + block_n) * k_moe_row_bytes;
  return shared_bytes_with_static(dynamic, static_shared_bytes());
}

runtime::KernelDef mma_gemm_kernel(int gemm, MoeDType dtype) {
  using common::raw_param;
  return gemm_kernel_def("gemm", gemm, dtype, "moe/gemm.cu",
                         {raw_param("block_m"), raw_param("block_n"), raw_param("warps_m"),
                          raw_param("warps_n"), raw_param("stages")});
}

llvm::Error launch_mma_gemm(runtime::Engine& engine, const MoeShape& s, const MmaGemm& g,
                            const MoeBuffers& b, int64_t tokens, int64_t blocks, CUstream stream) {
  runtime::LaunchConfig launch;
  launch.grid[0] = static_cast<unsigned>(g.weight_rows() / g.block_n);
  launch.grid[1] = static_cast<unsigned>(blocks);
  launch.block[0] = g.threads();
  launch.shared_bytes = g.shared_bytes();
  launch.stream = stream;
  const KernelIndex index = gemm_index(g.gemm, g.dtype, MoeGemmKernel::mma);
  if (g.gemm == 1) {
    specjit_kernels::MoeMmaGemm1Args args{};
    args.hidden = device_pointer<const unsigned char>(b.hidden);
    args.w13 = device_pointer<const unsigned char>(b.w13);
    fill_gemm1_args(args, s, b, tokens);
    return launch_variant(engine, index, g.values(tokens), launch, args);
  }
  specjit_kernels::MoeMmaGemm2Args args{};
  args.intermediate = device_pointer<const unsigned char>(b.intermediate);
  args.w2 = device_pointer<const unsigned char>(b.w2);
  fill_gemm2_args(args, s, b, tokens);
  return launch_variant(engine, index, g.values(tokens), launch, args);
}

} // namespace specjit::ops::moe_detail
