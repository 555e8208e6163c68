// specjit_kernel_desc -> runtime::KernelDef: every pointer, count and policy checked, with a
// message naming the field (the definition itself is validated by the engine afterwards).
#pragma once

#include "specjit/specjit.h"

#include "runtime/kernel_def.h"

#include <llvm/Support/Error.h>

namespace specjit::capi {

llvm::Expected<runtime::KernelDef> kernel_def_from_desc(const specjit_kernel_desc& desc);

} // namespace specjit::capi
