// The CUDA Driver API, opened with dlopen("libcuda.so.1") at first use and never linked:
// everything but loading and launching works on machines without a GPU or driver.
// Each entry point is resolved once through cuGetProcAddress, so versioned symbols
// (cuMemAlloc_v2, ...) are right for the cuda.h we build with.
#pragma once

#include "support/error.h"

#include <cuda.h>

#include <llvm/Support/Error.h>

#include <string>

namespace specjit::runtime {

// A failed driver call: the CUresult and the API that returned it.
class CudaError : public llvm::ErrorInfo<CudaError> {
public:
  static char ID;
  CudaError(CUresult result, std::string api, std::string detail);
  CUresult result() const { return m_result; }
  const std::string& api() const { return m_api; }
  const std::string& detail() const { return m_detail; }
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  CUresult m_result;
  std::string m_api;
  std::string m_detail; // the driver's error name and text, when it could give them
};

// The driver could not be loaded or initialized (no libcuda, cuInit failed): a SpecjitError
// (Errc::unsupported) that callers which report the kind of failure (the C ABI) tell apart.
class DriverUnavailable : public llvm::ErrorInfo<DriverUnavailable, SpecjitError> {
public:
  static char ID;
  explicit DriverUnavailable(std::string message)
      : ErrorInfo(Errc::unsupported, std::move(message)) {}
};

struct Driver {
#define SPECJIT_DRIVER_FUNCTION(name) decltype(&::name) name = nullptr;
#include "runtime/driver_functions.def"
#undef SPECJIT_DRIVER_FUNCTION

  // Wraps a CUresult in exactly one place: success, or a CudaError naming `api`.
  llvm::Error check(CUresult result, const char* api) const {
    if (result == CUDA_SUCCESS) [[likely]]
      return llvm::Error::success();
    return failure(result, api);
  }
  llvm::Error failure(CUresult result, const char* api) const; // the CudaError
};

// The process-wide driver: dlopen + cuInit on the first call; later calls return the same
// table (or the same error). Thread-safe.
llvm::Expected<const Driver&> driver();

// The table, once driver() has succeeded (a loaded module proves it): the launch path's
// accessor, without driver()'s checks.
const Driver& loaded_driver_table();

// True when a driver loads and reports at least one device. Never fails.
bool device_available();

} // namespace specjit::runtime
