// The kernels specjit ships, and the variants a serving image needs (the default manifest that
// `specjit precompile` uses when given none).
#pragma once

#include "runtime/kernel_def.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <string>
#include <vector>

namespace specjit::runtime {

// One variant to make ready: a kernel definition and one value per template parameter
// (a value is mapped through the parameter's policy, like a call's).
struct VariantRequest {
  KernelDef def;
  std::vector<int64_t> values;
};

// Every built-in kernel's definition with its default policies.
llvm::ArrayRef<KernelDef> builtin_kernels();
const KernelDef* find_builtin_kernel(llvm::StringRef id);

// The built-in default manifest: every reference model's variants (runtime/reference_models.h),
// what a serving image of the built-in ops needs; no test kernel.
std::vector<VariantRequest> default_variants();

// The test kernel (kernels_src/test/scale_tokens.cu): template <int COLS, long long NUM_TOKENS>.
// Parameters: "cols" (raw, exact), "num_tokens" (spec word, given policy).
KernelDef scale_tokens_kernel(Policy num_tokens_policy = Policy::dynamic());

} // namespace specjit::runtime
