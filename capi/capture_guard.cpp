#include "capi/capture_guard.h"

#include "runtime/driver.h"
#include "support/error.h"

namespace specjit::capi {

char CaptureRefused::ID = 0;

namespace {

// "(num_tokens=7, BLOCK=128)": the variant as the caller asked for it (its name expression is
// only known once it is resolved, which is what must not happen now).
std::string describe_values(const specjit_kernel& kernel, llvm::ArrayRef<int64_t> values) {
  std::string text = "(";
  for (size_t i = 0; i < values.size() && i < kernel.param_names.size(); ++i)
    text += fmt::format("{}{}={}", i ? ", " : "", kernel.param_names[i], values[i]);
  return text + ")";
}

} // namespace

llvm::Error refuse_while_capturing(const specjit_kernel& kernel, llvm::ArrayRef<int64_t> values,
                                   CUstream stream, const char* function) {
  auto drv = runtime::driver();
  if (!drv) {
    llvm::consumeError(drv.takeError());
    return llvm::Error::success();
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult result = drv->cuStreamIsCapturing(stream, &status);
  bool capturing = (result == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) ||
                   result == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (!capturing)
    return llvm::Error::success();
  return llvm::make_error<CaptureRefused>(fmt::format(
                    "{}: kernel {} variant {} is not ready and loaded, and the stream is "
                    "capturing a CUDA graph: nothing was compiled or loaded. Warm it up (get or "
                    "launch it once before capturing) or precompile it",
                    function, kernel.name, describe_values(kernel, values)));
}

} // namespace specjit::capi
