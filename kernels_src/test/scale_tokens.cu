// The engine's test kernel: y[t, c] = x[t, c] * alpha + t, for t < num_tokens and c < COLS.
// COLS is a template parameter (always compiled in); num_tokens is a run-time argument whose
// policy the caller picks (NUM_TOKENS_SPEC, see common/spec.cuh).
#include "common/spec.cuh"

namespace specjit_kernels {

template <int COLS, long long NUM_TOKENS_SPEC>
__global__ void scale_tokens(const float* __restrict__ x, float* __restrict__ y, int num_tokens,
                             float alpha) {
  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const long long total = tokens * COLS;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long t = i / COLS;
    y[i] = x[i] * alpha + static_cast<float>(t);
  }
}

} // namespace specjit_kernels
