// Parses ptxas' --verbose report out of an NVRTC log, for one kernel.
//   ptxas info    : Compiling entry function '_Z...' for 'sm_90a'
//   ptxas info    : Function properties for _Z...
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 18 registers, used 0 barriers, 384 bytes smem, 380 bytes cmem[0]
//   ptxas warning : ...   (kept verbatim, e.g. C7515 "wgmma ... serialized")
#pragma once

#include "jit/compiler.h"

#include <llvm/ADT/StringRef.h>

namespace specjit::jit {

ResourceUsage parse_ptxas_report(llvm::StringRef log, llvm::StringRef lowered_name);

} // namespace specjit::jit
