// What the built-in ops' kernel definitions share: a kernel of kernels_src/ named
// specjit_kernels::<id>, and its parameters by kind. Not part of the public API.
#pragma once

#include "runtime/kernel_def.h"

#include <string>
#include <vector>

namespace specjit::ops::common {

// A compiled-in value passed as itself: exact policy, raw encoding.
runtime::ParamDef raw_param(std::string name);
// A value passed as a spec word (common/spec.cuh) under `policy`.
runtime::ParamDef spec_param(std::string name,
                             runtime::Policy policy = runtime::Policy::dynamic());
// "num_tokens" as a spec word; dynamic by default: one variant serves every token count.
runtime::ParamDef tokens_param(runtime::Policy policy = runtime::Policy::dynamic());

// The embedded source `source` (kernels_src-relative) and its template function
// specjit_kernels::<id>, with no extra options.
runtime::KernelDef builtin_kernel(std::string id, std::string source,
                                  std::vector<runtime::ParamDef> params);

} // namespace specjit::ops::common
