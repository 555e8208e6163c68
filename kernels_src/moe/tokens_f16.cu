// The tokens of FP8 GEMM1's f16-token tiles (moe/gemm_wgmma.cu, MoeWgmma::k_t16): hidden e4m3
// [T, H] -> f16 [T, H], once per call, so that no GEMM1 CTA converts its token tile itself.
// Exact (every e4m3 value is an f16 value). Each 16 values of a row are stored in the k order
// of wgmma's f16 register-A fragments (e4m3x16_to_f16_fragment_order): the GEMM's weights are
// converted into that order in registers, and the f16 tokens, wgmma's B, must follow it. Each
// thread converts one 16-byte chunk per step (H % 16 == 0: the op's rule for FP8 shapes).
#include "common/spec.cuh"
#include "common/wgmma.cuh"

namespace specjit_kernels {

template <long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(256)
    moe_tokens_f16(const unsigned char* __restrict__ hidden, unsigned char* __restrict__ out,
                   int num_tokens, int hidden_size) {
  const long long chunks = Spec<NUM_TOKENS_SPEC>::value(num_tokens) * (hidden_size / 16);
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * 256) {
    U32x4 first, second;
    e4m3x16_to_f16_fragment_order(load_streaming(hidden + i * 16), first, second);
    store_u32x4(out + i * 32, first);
    store_u32x4(out + i * 32 + 16, second);
  }
}

} // namespace specjit_kernels
