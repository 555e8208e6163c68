#include "capi/status.h"

#include "capi/capture_guard.h"

#include "cache/entry_format.h"
#include "jit/compiler.h"
#include "runtime/driver.h"
#include "support/error.h"

#include <string>

namespace specjit::capi {

namespace {

// The message lives until the thread's next failing call; `t_failed` says whether the last
// call failed (a plain flag, so that the hot path's success costs one store).
thread_local std::string t_message;


specjit_status status_of_errc(Errc code) {
  switch (code) {
  case Errc::invalid_argument: return SPECJIT_ERROR_INVALID_ARGUMENT;
  case Errc::not_found: return SPECJIT_ERROR_NOT_FOUND;
  case Errc::strict_violation: return SPECJIT_ERROR_STRICT;
  case Errc::io:
  case Errc::corrupt:
  case Errc::timeout:
    return SPECJIT_ERROR_CACHE;
  case Errc::compile_failed:
    return SPECJIT_ERROR_COMPILE;
  case Errc::driver:
    return SPECJIT_ERROR_DRIVER;
  case Errc::unsupported:
    return SPECJIT_ERROR_INTERNAL;
  }
  return SPECJIT_ERROR_INTERNAL;
}

// When an error joins several, the one a caller can act on most precisely wins.
int precedence(specjit_status status) {
  switch (status) {
  case SPECJIT_ERROR_COMPILE: return 7;
  case SPECJIT_ERROR_STRICT: return 6;
  case SPECJIT_ERROR_CAPTURING: return 5;
  case SPECJIT_ERROR_NOT_FOUND: return 4;
  case SPECJIT_ERROR_INVALID_ARGUMENT: return 3;
  case SPECJIT_ERROR_DRIVER: return 2;
  case SPECJIT_ERROR_CACHE: return 1;
  default: return 0;
  }
}

} // namespace

specjit_status status_of(const llvm::ErrorInfoBase& error) {
  if (error.isA<CaptureRefused>())
    return SPECJIT_ERROR_CAPTURING;
  if (error.isA<jit::CompileError>())
    return SPECJIT_ERROR_COMPILE;
  if (error.isA<runtime::CudaError>() || error.isA<runtime::DriverUnavailable>())
    return SPECJIT_ERROR_DRIVER;
  if (error.isA<cache::EntryCorruptError>())
    return SPECJIT_ERROR_CACHE;
  if (error.isA<SpecjitError>())
    return status_of_errc(static_cast<const SpecjitError&>(error).code());
  return SPECJIT_ERROR_INTERNAL;
}

[[gnu::tls_model("initial-exec")]] thread_local bool t_failed = false;

specjit_status finish_failure(llvm::Error error) {
  specjit_status status = SPECJIT_ERROR_INTERNAL;
  bool first = true;
  std::string message;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase& part) {
    specjit_status part_status = status_of(part);
    if (first || precedence(part_status) > precedence(status))
      status = part_status;
    if (!first)
      message += "\n";
    message += part.message();
    first = false;
  });
  return fail(status, std::move(message));
}

specjit_status fail(specjit_status status, std::string message) {
  t_message = std::move(message);
  t_failed = true;
  return status;
}

void succeed() { t_failed = false; }

const char* last_error() { return t_failed ? t_message.c_str() : ""; }

} // namespace specjit::capi
