"""The kernel the Python benchmarks launch: one store per thread, nothing when n = 0."""

SOURCE = r"""
template <int BLOCK>
__global__ void scale(float* x, long long n, float factor) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] *= factor;
}
"""
