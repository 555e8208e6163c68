// Packs a MoE weight tensor [rows = E x N][K bytes] (e4m3 or bf16, as bytes) into the layout the
// wgmma GEMMs read by bulk copies (MoeWeights in moe/wgmma_pipeline.cuh): pieces of 32 rows x
// 128 bytes of K (k_moe_piece_rows, moe/moe_common.cuh), piece (row / 32, k / 128) at
// 4096 * (row / 32 * K / 128 + k / 128), each piece in the order a 128-byte-swizzled TMA box
// lands in shared memory: 16-byte chunk c of its row r
// at chunk c ^ (r % 8) of that row's 128 bytes. The op checks rows % 32 == 0 and K % 128 == 0.
// Each thread writes one 16-byte chunk of the packed copy per step (reads of 16 bytes too).
#include "common/bf16.cuh"
#include "common/spec.cuh"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

template <long long ROWS_SPEC>
__global__ void __launch_bounds__(256)
    moe_pack_weights(const unsigned char* __restrict__ weights, unsigned char* __restrict__ packed,
                     int rows, int k_bytes) {
  const long long chunks = Spec<ROWS_SPEC>::value(rows) * (k_bytes / 16);
  const long long k_pieces = k_bytes / 128;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * 256) {
    const long long piece = i / (k_moe_piece_bytes / 16); // 16-byte chunks, 8 a 128-byte row
    const int r = static_cast<int>(i / 8 % k_moe_piece_rows), c = static_cast<int>(i % 8) ^ (r % 8);
    const long long row = piece / k_pieces * k_moe_piece_rows + r,
                    k = piece % k_pieces * 128 + c * 16;
    store_u32x4(packed + i * 16, load_streaming(weights + row * k_bytes + k));
  }
}

} // namespace specjit_kernels
