// A kernel of an application's own, defined by manifest.json next to this folder.
#include "app/factor.h"

template <int BLOCK> __global__ void app_scale(float* x, long long num_tokens) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < num_tokens)
    x[i] *= APP_SCALE * app::factor();
}
