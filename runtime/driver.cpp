#include "runtime/driver.h"

#include "support/error.h"

#include <dlfcn.h>

#include <mutex>

namespace specjit::runtime {

char CudaError::ID = 0;
char DriverUnavailable::ID = 0;

CudaError::CudaError(CUresult result, std::string api, std::string detail)
    : m_result(result), m_api(std::move(api)), m_detail(std::move(detail)) {}

void CudaError::log(llvm::raw_ostream& os) const {
  os << m_api << " failed: " << m_detail << " (CUresult " << static_cast<int>(m_result) << ")";
}

std::error_code CudaError::convertToErrorCode() const { return make_error_code(Errc::driver); }

llvm::Error Driver::failure(CUresult result, const char* api) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName != nullptr)
    cuGetErrorName(result, &name);
  if (cuGetErrorString != nullptr)
    cuGetErrorString(result, &text);
  std::string detail = fmt::format("{}{}{}", name ? name : "CUDA error", text ? ": " : "",
                                   text ? text : "");
  return llvm::make_error<CudaError>(result, api, std::move(detail));
}

namespace {

#define SPECJIT_STRINGIFY_EXPANDED(x) SPECJIT_STRINGIFY(x)
#define SPECJIT_STRINGIFY(x) #x

struct LoadedDriver {
  Driver table;
  std::string error; // empty on success
};

LoadedDriver load_driver() {
  LoadedDriver loaded;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace of the host process.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    loaded.error = fmt::format("the CUDA driver (libcuda.so.1) could not be loaded: {}",
                               reason ? reason : "unknown reason");
    return loaded;
  }
  // Each macro names the symbol cuda.h maps the API to (cuMemAlloc -> cuMemAlloc_v2), so the
  // function type and the symbol always agree.
#define SPECJIT_DRIVER_FUNCTION(name)                                                            \
  loaded.table.name =                                                                            \
      reinterpret_cast<decltype(&::name)>(dlsym(handle, SPECJIT_STRINGIFY_EXPANDED(name)));      \
  if (loaded.table.name == nullptr && loaded.error.empty())                                      \
    loaded.error = "the CUDA driver lacks " SPECJIT_STRINGIFY_EXPANDED(name) " (driver too old)";
#include "runtime/driver_functions.def"
#undef SPECJIT_DRIVER_FUNCTION
  if (!loaded.error.empty())
    return loaded;
  if (llvm::Error err = loaded.table.check(loaded.table.cuInit(0), "cuInit"))
    loaded.error = llvm::toString(std::move(err));
  return loaded;
}

const LoadedDriver& loaded_driver() {
  // Loaded once, on first use, never at program start.
  static const LoadedDriver loaded = load_driver();
  return loaded;
}

} // namespace

llvm::Expected<const Driver&> driver() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.error.empty())
    return llvm::make_error<DriverUnavailable>(loaded.error);
  return loaded.table;
}

const Driver& loaded_driver_table() { return loaded_driver().table; }

bool device_available() {
  auto drv = driver();
  if (!drv) {
    llvm::consumeError(drv.takeError());
    return false;
  }
  int count = 0;
  return drv->cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
}

} // namespace specjit::runtime
