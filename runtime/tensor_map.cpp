#include "runtime/tensor_map.h"

#include "support/error.h"

namespace specjit::runtime {

llvm::Expected<CUtensorMap> tensor_map_u8_3d(CUdeviceptr base, std::array<uint64_t, 3> dims,
                                             std::array<uint32_t, 3> box) {
  if (base % 16 != 0)
    return make_error(Errc::invalid_argument, "tensor map: base address {:#x} is not 16-byte aligned",
                      base);
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
  auto drv = driver();
  if (!drv)
    return drv.takeError();
  CUtensorMap map;
  const cuuint64_t strides[2] = {dims[0], dims[0] * dims[1]};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  if (auto err = drv->check(
          drv->cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3,
                                      reinterpret_cast<void*>(base), dims.data(), strides,
                                      box.data(), element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          "cuTensorMapEncodeTiled"))
    return err;
  return map;
}

} // namespace specjit::runtime
