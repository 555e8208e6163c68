// The KernelDef of cute_scale.cu, shared by its tests and `specjit-bench byok`.
#pragma once

#include "runtime/kernel_def.h"
#include "support/config.h"

#include <string>

namespace specjit::examples {

// cute_scale<TILE_M>(x, out, scale, num_tokens): num_tokens dynamic, tile_m exact; the include
// dirs are the CUTLASS tree, then the toolkit's.
inline runtime::KernelDef cute_scale_kernel(const Config& config, const std::string& source_path,
                                            const std::string& cutlass_include) {
  using namespace runtime;
  KernelDef def;
  def.id = "cute_scale";
  def.source = KernelSource::from_file(source_path);
  def.function = "cute_scale";
  def.params = {ParamDef::user("num_tokens", Policy::dynamic()),
                ParamDef::user("tile_m", Policy::exact())};
  def.include_dirs = {cutlass_include};
  for (const std::string& dir : config.cuda_include_dirs())
    def.include_dirs.push_back(dir);
  def.options = {"--std=c++17", "-default-device"};
  return def;
}

} // namespace specjit::examples
