// The CuTe kernel of examples/cute/cute_scale.cu as a KernelDef, for its CI and GPU tests.
#pragma once

#include "runtime/kernel_def.h"
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

// cute_scale<TILE_M>(x, out, scale, num_tokens): num_tokens dynamic, tile_m exact.
inline runtime::KernelDef cute_kernel(const Config& config, const std::string& cutlass) {
  using namespace runtime;
  KernelDef def;
  def.id = "cute_scale";
  def.source = KernelSource::from_file(SPECJIT_SOURCE_DIR "/examples/cute/cute_scale.cu");
  def.function = "cute_scale";
  def.params = {ParamDef::user("num_tokens", Policy::dynamic()),
                ParamDef::user("tile_m", Policy::exact())};
  def.include_dirs = {cutlass};
  for (const std::string& dir : config.cuda_include_dirs())
    def.include_dirs.push_back(dir);
  def.options = {"--std=c++17", "-default-device"};
  return def;
}

} // namespace specjit::test
