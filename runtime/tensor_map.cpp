#include "runtime/tensor_map.h"

#include "support/error.h"

namespace specjit::runtime {

namespace {

// cuTensorMapEncodeTiled over bytes at `base` (checked 16-byte aligned): rank dims.size(), byte
// strides of dims 1.. (`strides`), 256-byte L2 promotion.
llvm::Expected<CUtensorMap> encode_u8(CUdeviceptr base, llvm::ArrayRef<cuuint64_t> dims,
                                      llvm::ArrayRef<cuuint64_t> strides,
                                      llvm::ArrayRef<cuuint32_t> box, CUtensorMapSwizzle swizzle) {
  if (base % 16 != 0)
    return make_error(Errc::invalid_argument, "tensor map: base address {:#x} is not 16-byte aligned",
                      base);
  auto drv = driver();
  if (!drv)
    return drv.takeError();
  CUtensorMap map;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  if (auto err =
          drv->check(drv->cuTensorMapEncodeTiled(
                         &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, static_cast<cuuint32_t>(dims.size()),
                         reinterpret_cast<void*>(base), dims.data(), strides.data(), box.data(),
                         element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                     "cuTensorMapEncodeTiled"))
    return err;
  return map;
}

} // namespace

llvm::Expected<CUtensorMap> tensor_map_u8_3d(CUdeviceptr base, std::array<uint64_t, 3> dims,
                                             std::array<uint32_t, 3> box) {
  if (dims[0] % 16 != 0)
    return make_error(Errc::invalid_argument,
                      "tensor map: the inner dimension ({} bytes) is not a multiple of 16", dims[0]);
  for (int i = 0; i < 3; ++i)
    if (box[i] < 1 || box[i] > 256 || box[i] > dims[i])
      return make_error(Errc::invalid_argument,
                        "tensor map: box[{}] = {} must be in [1, min(256, {})]", i, box[i],
                        dims[i]);
  if (box[0] > 128)
    return make_error(Errc::invalid_argument,
                      "tensor map: a 128-byte swizzle loads at most 128 inner bytes, got {}",
                      box[0]);
  const cuuint64_t strides[2] = {dims[0], dims[0] * dims[1]};
  return encode_u8(base, {dims[0], dims[1], dims[2]}, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

llvm::Expected<CUtensorMap> tensor_map_packed_weights(CUdeviceptr base, uint64_t rows,
                                                      uint64_t k_bytes, uint32_t piece_rows,
                                                      uint32_t box_rows) {
  if (piece_rows == 0 || piece_rows > 256 || rows % piece_rows != 0 || k_bytes % 128 != 0 ||
      box_rows % piece_rows != 0 || box_rows == 0 || box_rows > 256 || box_rows > rows)
    return make_error(Errc::invalid_argument,
                      "tensor map: packed weights of {} rows of {} bytes in boxes of {} rows are "
                      "not whole pieces of {} rows x 128 bytes",
                      rows, k_bytes, box_rows, piece_rows);
  const uint64_t piece_bytes = 128ull * piece_rows;
  const cuuint64_t strides[3] = {128, piece_bytes, piece_bytes * (k_bytes / 128)};
  const cuuint32_t box[4] = {128, piece_rows, 1, box_rows / piece_rows};
  // No swizzle: the pieces hold their bytes in the 128-byte swizzle's order already.
  return encode_u8(base, {128, piece_rows, k_bytes / 128, rows / piece_rows}, strides, box,
                   CU_TENSOR_MAP_SWIZZLE_NONE);
}

} // namespace specjit::runtime
