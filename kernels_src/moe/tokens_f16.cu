// The tokens of FP8 GEMM1's f16-token tiles (moe/gemm_wgmma.cu, MoeWgmma::k_t16): hidden e4m3
// [T, H] -> f16, once per call, so that no GEMM1 CTA converts its token tile itself. Exact (every
// e4m3 value is an f16 value). Two orders (the host's rule picks one with the GEMM1 variant):
//   SORTED 0: token order, [T, H]; GEMM1 gathers a block's rows.
//   SORTED 1: the sorted (padded) order of the slots (moe_align's sorted_ids), [padded, H]: row p
//             is the token of slot sorted_ids[p], so that a GEMM1 stage loads a token block's
//             rows as one TMA box. Padding rows are not written (their outputs are dropped).
// Each 16 values of a row are stored in the k order of wgmma's f16 register-A fragments
// (e4m3x16_to_f16_fragment_order): the GEMM's weights are converted into that order in
// registers, and the f16 tokens, wgmma's B, must follow it.
//   SORTED 2: as 1, but the e4m3 bytes as they are, [padded, H] (the normal orientation's e4m3
//             tiles reading the sorted copy, MoeOrientation::normal_sorted).
// Each thread converts (copies) one 16-byte chunk per step (H % 16 == 0: the op's rule for FP8
// shapes).
#include "common/spec.cuh"
#include "common/wgmma.cuh"

namespace specjit_kernels {

template <int SORTED, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(256)
    moe_tokens_f16(const unsigned char* __restrict__ hidden, const int* __restrict__ sorted_ids,
                   const int* __restrict__ num_post_padded, unsigned char* __restrict__ out,
                   int num_tokens, int top_k, int hidden_size) {
  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const int row_chunks = hidden_size / 16;
  const long long rows = SORTED ? static_cast<long long>(*num_post_padded) : tokens;
  const long long chunks = rows * row_chunks;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * 256) {
    long long chunk = i; // of hidden
    if constexpr (SORTED) {
      const int slot = sorted_ids[i / row_chunks];
      if (slot < 0 || slot >= tokens * top_k)
        continue; // padding
      chunk = static_cast<long long>(slot / top_k) * row_chunks + i % row_chunks;
    }
    if constexpr (SORTED == 2) {
      store_u32x4(out + i * 16, *reinterpret_cast<const U32x4*>(hidden + chunk * 16));
      continue;
    }
    U32x4 first, second;
    e4m3x16_to_f16_fragment_order(SORTED ? *reinterpret_cast<const U32x4*>(hidden + chunk * 16)
                                         : load_streaming(hidden + chunk * 16),
                                  first, second);
    store_u32x4(out + i * 32, first);
    store_u32x4(out + i * 32 + 16, second);
  }
}

} // namespace specjit_kernels
