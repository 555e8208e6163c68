// The CUDA-graph capture guard: a compile or a module load while a stream captures would fail
// the capture (or stall it for seconds), so the C ABI refuses it with SPECJIT_ERROR_CAPTURING.
// Asked only when the variant is not ready and loaded: the hot path makes no extra driver call.
#pragma once

#include "capi/handles.h"

#include "support/error.h"

namespace specjit::capi {

// The refusal: SPECJIT_ERROR_CAPTURING (an invalid_argument SpecjitError for everything else).
class CaptureRefused : public llvm::ErrorInfo<CaptureRefused, SpecjitError> {
public:
  static char ID;
  explicit CaptureRefused(std::string message)
      : ErrorInfo(Errc::invalid_argument, std::move(message)) {}
};

// Success when `stream` is not capturing (or no driver answers: get() then reports why). A NULL
// stream (specjit_kernel_get has none) asks about the legacy default stream, which reports a
// capture in progress on any blocking stream of the current context.
llvm::Error refuse_while_capturing(const specjit_kernel& kernel, llvm::ArrayRef<int64_t> values,
                                   CUstream stream, const char* function);

} // namespace specjit::capi
