// A small CuTe kernel brought at run time: out = x * scale over a [num_tokens, 128] row-major
// tensor. Each block owns one TILE_M x 128 tile, described by a cute::Layout; num_tokens is a
// run-time argument (a dynamic parameter), TILE_M a template parameter.
#include <cute/tensor.hpp>

template <int TILE_M>
__global__ void cute_scale(const float* x, float* out, float scale, int num_tokens) {
  using namespace cute;
  constexpr int k_cols = 128;
  auto layout = make_layout(make_shape(num_tokens, Int<k_cols>{}), make_stride(Int<k_cols>{}, _1{}));
  Tensor src = make_tensor(make_gmem_ptr(x), layout);
  Tensor dst = make_tensor(make_gmem_ptr(out), layout);
  auto tile = make_shape(Int<TILE_M>{}, Int<k_cols>{});
  Tensor src_tile = local_tile(src, tile, make_coord(blockIdx.x, 0));
  Tensor dst_tile = local_tile(dst, tile, make_coord(blockIdx.x, 0));
  int first_row = blockIdx.x * TILE_M;
  for (int i = threadIdx.x; i < TILE_M * k_cols; i += blockDim.x) {
    int row = i / k_cols;
    int col = i % k_cols;
    if (first_row + row < num_tokens)
      dst_tile(row, col) = src_tile(row, col) * scale;
  }
}
