#include "runtime/tensor.h"

#include "support/error.h"

#include <fmt/format.h>

namespace specjit::runtime {

size_t dtype_size(DType dtype) {
  switch (dtype) {
  case DType::bf16:
  case DType::f16:
    return 2;
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::i64:
    return 8;
  case DType::e4m3:
  case DType::u8:
    return 1;
  }
  return 0;
}

llvm::StringRef dtype_name(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return "bf16";
  case DType::f16:
    return "f16";
  case DType::f32:
    return "f32";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::e4m3:
    return "e4m3";
  case DType::u8:
    return "u8";
  }
  return "?";
}

int64_t TensorRef::numel() const {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

bool TensorRef::contiguous() const {
  if (strides.empty())
    return true;
  if (strides.size() != shape.size())
    return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    // A dimension of extent 1 is never stepped over, so its stride does not matter (PyTorch
    // gives such dimensions arbitrary strides after slicing or unsqueezing).
    if (shape[i] != 1 && strides[i] != expected)
      return false;
    expected *= shape[i];
  }
  return true;
}

namespace {

std::string extents_text(llvm::ArrayRef<int64_t> extents) {
  std::string text;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (i != 0)
      text += ", ";
    text += extents[i] < 0 ? std::string("*") : std::to_string(extents[i]);
  }
  return text;
}

bool shape_matches(llvm::ArrayRef<int64_t> actual, llvm::ArrayRef<int64_t> expected) {
  if (actual.size() != expected.size())
    return false;
  for (size_t i = 0; i < actual.size(); ++i)
    if (expected[i] >= 0 ? actual[i] != expected[i] : actual[i] < 0)
      return false;
  return true;
}

} // namespace

std::string TensorRef::describe() const {
  return fmt::format("{}[{}]", dtype_name(dtype).str(), extents_text(shape));
}

llvm::Error expect_tensor(llvm::StringRef op, llvm::StringRef argument, const TensorRef& tensor,
                          DType dtype, llvm::ArrayRef<int64_t> shape, size_t alignment) {
  if (tensor.dtype != dtype || !shape_matches(tensor.shape, shape))
    return make_error(Errc::invalid_argument, "{}: {}: expected {}[{}], got {}", op.str(),
                      argument.str(), dtype_name(dtype).str(), extents_text(shape),
                      tensor.describe());
  if (!tensor.contiguous())
    return make_error(Errc::invalid_argument,
                      "{}: {}: expected a contiguous (row-major) tensor, got {} with strides [{}]",
                      op.str(), argument.str(), tensor.describe(), extents_text(tensor.strides));
  if (tensor.numel() == 0)
    return llvm::Error::success(); // nothing is ever read or written through it
  if (tensor.data == 0)
    return make_error(Errc::invalid_argument, "{}: {}: {} has a null data pointer", op.str(),
                      argument.str(), tensor.describe());
  if (alignment > 1 && tensor.data % alignment != 0)
    return make_error(Errc::invalid_argument,
                      "{}: {}: data address {:#x} is not {}-byte aligned (the kernel uses "
                      "{}-byte accesses)",
                      op.str(), argument.str(), static_cast<unsigned long long>(tensor.data),
                      alignment, alignment);
  return llvm::Error::success();
}

} // namespace specjit::runtime
