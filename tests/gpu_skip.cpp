#include "test_support.h"

#include "runtime/driver.h"

#include <cstdio>

namespace specjit::test {

bool gpu_or_skip(const char* test_name) {
  if (runtime::device_available())
    return true;
  std::string reason = "no CUDA driver or device";
  if (auto drv = runtime::driver(); !drv)
    reason = llvm::toString(drv.takeError());
  std::printf("[gpu] SKIPPED %s: %s\n", test_name, reason.c_str());
  std::fflush(stdout);
  return false;
}

} // namespace specjit::test
