// A non-owning view of a device tensor, so ops can validate what callers pass (shape, dtype,
// strides, alignment) and fail with an error naming the argument, never fault on the device.
#pragma once

#include <cuda.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>

namespace specjit::runtime {

enum class DType : uint8_t { bf16, f16, f32, i32, i64, e4m3, u8 };
size_t dtype_size(DType dtype);
llvm::StringRef dtype_name(DType dtype);

struct TensorRef {
  CUdeviceptr data = 0;
  DType dtype = DType::f32;
  llvm::SmallVector<int64_t, 4> shape;
  llvm::SmallVector<int64_t, 4> strides; // in elements; empty means contiguous row-major

  int64_t numel() const;
  bool contiguous() const;
  std::string describe() const; // "bf16[16, 128, 512]"
};

// Checks one argument of an op: dtype, rank and extents (-1 matches any extent), row-major
// contiguity, non-null data (unless numel is 0) and `alignment` bytes of the base address.
// The error names the op, the argument and what was expected.
llvm::Error expect_tensor(llvm::StringRef op, llvm::StringRef argument, const TensorRef& tensor,
                          DType dtype, llvm::ArrayRef<int64_t> shape, size_t alignment);

} // namespace specjit::runtime
