// The engine's test kernel (kernels_src/test/scale_tokens.cu): template <int COLS, long long
// NUM_TOKENS>, y[t, c] = x[t, c] * alpha + t. The engine's tests, the CLI's tests and the
// benchmarks use it without any op; manifests name it as "scale_tokens".
#pragma once

#include "runtime/kernel_def.h"

namespace specjit::runtime {

// Parameters: "cols" (raw, exact), "num_tokens" (spec word, given policy).
KernelDef scale_tokens_kernel(Policy num_tokens_policy = Policy::dynamic());

} // namespace specjit::runtime
