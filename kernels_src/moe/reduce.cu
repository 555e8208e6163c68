// The top-k reduction: out[t, :] = bf16(sum over j < TOP_K of slot_out[t * TOP_K + j, :]) with
// fp32 sums in slot order (ops/moe/fused_moe.h). Each thread handles 8 columns (16-byte
// loads and stores); the op guarantees hidden % 8 == 0 and 16-byte aligned rows.
#include "common/spec.cuh"
#include "common/mma.cuh"

namespace specjit_kernels {

template <int TOP_K, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(256)
    moe_reduce(const unsigned short* __restrict__ slot_out, unsigned short* __restrict__ out,
               int num_tokens, int hidden) {
  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const long long vectors_per_row = hidden / 8;
  const long long total = tokens * vectors_per_row;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * 256) {
    const long long t = i / vectors_per_row;
    const long long c = (i - t * vectors_per_row) * 8;
    float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < TOP_K; ++j) {
      const U32x4 v = load_streaming(slot_out + (t * TOP_K + j) * hidden + c);
      const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        sum[2 * w] += bf16_low(words[w]);
        sum[2 * w + 1] += bf16_high(words[w]);
      }
    }
    U32x4 r;
    r.x = bf16x2(sum[0], sum[1]);
    r.y = bf16x2(sum[2], sum[3]);
    r.z = bf16x2(sum[4], sum[5]);
    r.w = bf16x2(sum[6], sum[7]);
    store_u32x4(out + t * hidden + c, r);
  }
}

} // namespace specjit_kernels
