// The CuTe kernel of examples/cute/cute_scale.cu as a KernelDef, for its CI and GPU tests.
#pragma once

#include "examples/cute/cute_scale.h"
#include "support/config.h"

#include <llvm/Support/FileSystem.h>

#include <string>

namespace specjit::test {

// The CUTLASS include tree named by SPECJIT_CUTLASS_INCLUDE, or empty when it is not there.
inline std::string cutlass_include() {
  auto config = Config::from_environment();
  if (!config) {
    llvm::consumeError(config.takeError());
    return {};
  }
  std::string dir = config->cutlass_include;
  if (dir.empty() || !llvm::sys::fs::exists(dir + "/cute/tensor.hpp"))
    return {};
  return dir;
}

inline runtime::KernelDef cute_kernel(const Config& config, const std::string& cutlass) {
  return examples::cute_scale_kernel(config, SPECJIT_SOURCE_DIR "/examples/cute/cute_scale.cu",
                                     cutlass);
}

} // namespace specjit::test
