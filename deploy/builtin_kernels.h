// The kernels specjit ships, and the variants a serving image needs (the default manifest that
// `specjit precompile` uses when given none).
#pragma once

#include "runtime/kernel_def.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <vector>

namespace specjit::deploy {

using runtime::KernelDef;
using runtime::VariantRequest;

// Every built-in kernel's definition with its default policies: the ops' kernels and the
// engine's test kernel (runtime/test_kernel.h).
llvm::ArrayRef<KernelDef> builtin_kernels();
const KernelDef* find_builtin_kernel(llvm::StringRef id);

// The built-in default manifest: every reference model's variants (deploy/reference_models.h),
// what a serving image of the built-in ops needs; no test kernel.
std::vector<VariantRequest> default_variants();

} // namespace specjit::deploy
