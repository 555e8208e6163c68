// Test-only: includes a header by its name relative to this file's folder, which NVRTC cannot
// resolve by itself (jit/source_closure.h registers the header under that spelling too).
#include "relative_helper.cuh"
#include "common/spec.cuh"

namespace specjit_kernels {

template <int N> __global__ void add_relative(int* y) {
  y[threadIdx.x] += N * k_relative_helper_value;
}

} // namespace specjit_kernels
