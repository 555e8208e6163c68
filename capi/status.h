// The C ABI's errors: the one mapping from llvm::Error to specjit_status, and the calling
// thread's last message (specjit_last_error).
#pragma once

#include "specjit/specjit.h"

#include <llvm/Support/Error.h>

namespace specjit::capi {

// The status for an error (its most specific part, when it holds several). Typed payloads
// decide: jit::CompileError -> COMPILE, runtime::CudaError -> DRIVER, SpecjitError by its Errc.
specjit_status status_of(const llvm::ErrorInfoBase& error);

// Whether the calling thread's last call failed (specjit_last_error's message is then valid).
// initial-exec: written on every successful call of a shared library.
[[gnu::tls_model("initial-exec")]] extern thread_local bool t_failed;

// A failure's status; the thread's message becomes the error's text.
specjit_status finish_failure(llvm::Error error);
// Consumes `error`: success -> SPECJIT_OK (and the thread's message is cleared), otherwise the
// thread's message becomes the error's text and its status is returned.
inline specjit_status finish(llvm::Error error) {
  if (!error) [[likely]] {
    t_failed = false;
    return SPECJIT_OK;
  }
  return finish_failure(std::move(error));
}
// The same for a failure the C ABI itself detects.
specjit_status fail(specjit_status status, std::string message);
// Marks the calling thread's last call as successful (the hot path's cheap form of finish).
void succeed();

const char* last_error();

} // namespace specjit::capi
