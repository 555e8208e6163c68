// Probe: the prefill FP8 GEMM2's pipeline alone (kernels_src/moe/wgmma_pipeline.cuh and
// wgmma_consume.cuh, normal orientation, 128 token rows x 128 weight rows, 4 stages of 32 KB),
// without the routing, the epilogue or the grid's waves: one CTA an SM on every SM, a producer
// thread loading each 128-byte stage of K as two TMA boxes (token rows from an L2-resident
// buffer, weight rows from HBM or from L2), two consumer warpgroups running the e4m3 K loop on it
// (four m64n128k32 MMAs a stage each) and
//   promote   promoting each stage into fp32 totals (the kernel's loop);
//   promote2  promoting every second stage;
//   none      releasing each stage without MMAs (the loads alone).
// Each CTA streams tiles of 112 stages (Mixtral's K = 14336 bytes), its weight rows changing from
// tile to tile as the kernel's CTAs do. Prints MACs a cycle an SM (e4m3 peak 4096). Compare with
// tools/probes/wgmma_rate.cu (the loop without loads) and tma_ingress.cu (the loads without the
// loop). Built by hand (ctest only compiles it, label probes; running it needs a GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o gemm2_loop tools/probes/gemm2_loop.cu -L/usr/local/cuda/lib64/stubs -lcuda
#include "probe_common.cuh"

#include <cstdio>

using namespace specjit_kernels;

constexpr int k_k_bytes = 14336;             // a row: Mixtral GEMM2's K in e4m3
constexpr int k_k_stages = k_k_bytes / 128;  // 112 stages a tile
constexpr int k_stages = 4;                  // as the table's Mixtral T = 1024 GEMM2
constexpr int k_stage_bytes = 2 * 128 * 128; // token rows, then weight rows
enum Mode { promote, promote2, none };

template <Mode MODE>
__global__ void __launch_bounds__(288, 1)
    loop(const __grid_constant__ TmaDesc tokens, const __grid_constant__ TmaDesc weights,
         int weight_tiles, int steps, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * k_stages];
  const unsigned base = (shared_address(smem) + 1023) & ~1023u;
  const unsigned full = shared_address(bars), empty = full + 8 * k_stages;
  const int tid = static_cast<int>(threadIdx.x);
  probes::init_stage_barriers(full, empty, k_stages, 256);
  const long long t0 = clock64();
  if (tid >= 256) { // the producer warp; one thread issues
    if (tid == 256) {
#pragma unroll 1
      for (int i = 0; i < steps; ++i) {
        const int s = i % k_stages, k = (i % k_k_stages) * 128;
        const int tile = (blockIdx.x + (i / k_k_stages) * gridDim.x) % weight_tiles;
        mbarrier_wait(empty + 8 * s, ((i / k_stages) & 1) ^ 1);
        mbarrier_arrive_expect_tx(full + 8 * s, k_stage_bytes);
        tma_load_3d(base + s * k_stage_bytes, &tokens, full + 8 * s, k, 0, 0);
        tma_load_3d(base + s * k_stage_bytes + 128 * 128, &weights, full + 8 * s, k, tile * 128, 0);
      }
    }
    return;
  }
  const int wg = tid >> 7;
  float acc[64], part[64];
  for (int i = 0; i < 64; ++i)
    acc[i] = 0.0f;
  // The stages of one promotion: `group` of them from step i, their MMAs in one wgmma group.
  constexpr int group = MODE == promote2 ? 2 : 1;
#pragma unroll 1
  for (int i = 0; i < steps; i += group) {
#pragma unroll
    for (int g = 0; g < group; ++g)
      mbarrier_wait(full + 8 * ((i + g) % k_stages), ((i + g) / k_stages) & 1);
    if constexpr (MODE != none) {
      fence_registers<64>(part);
      wgmma_fence();
    }
#pragma unroll
    for (int g = 0; g < group; ++g) {
      const int s = (i + g) % k_stages;
      if constexpr (MODE != none) {
        const unsigned long long a = wgmma_desc_sw128(base + s * k_stage_bytes + wg * 64 * 128);
        const unsigned long long b = wgmma_desc_sw128(base + s * k_stage_bytes + 128 * 128);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          Wgmma<WgmmaType::e4m3, 128>::mma(part, a + 2 * ks, b + 2 * ks, (ks != 0) | (g != 0));
      }
    }
    if constexpr (MODE != none) {
      wgmma_commit();
      fence_registers<64>(part);
      wgmma_wait<0>();
      fence_registers<64>(part);
#pragma unroll
      for (int r = 0; r < 64; ++r)
        acc[r] += part[r];
    }
#pragma unroll
    for (int g = 0; g < group; ++g)
      mbarrier_arrive(empty + 8 * ((i + g) % k_stages));
  }
  const long long t1 = clock64();
  float sum = 0.0f;
  for (int r = 0; r < 64; ++r)
    sum += acc[r];
  if (tid == 0)
    cycles[blockIdx.x] = t1 - t0;
  if (sum == 12345.0f)
    sink[blockIdx.x] = sum;
}

template <Mode MODE>
void run(const char* source, const TmaDesc& tokens, const TmaDesc& weights, int weight_tiles,
         int sms) {
  auto kernel = loop<MODE>;
  const int smem = k_stages * k_stage_bytes + 1024;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  long long* cycles;
  float* sink;
  cudaMalloc(&cycles, sms * sizeof(long long));
  cudaMalloc(&sink, sms * sizeof(float));
  const int steps = 8 * k_k_stages; // 8 tiles a CTA
  kernel<<<sms, 288, smem>>>(tokens, weights, weight_tiles, k_k_stages, cycles, sink); // warm up
  const float ms = probes::time_ms(
      [&] { kernel<<<sms, 288, smem>>>(tokens, weights, weight_tiles, steps, cycles, sink); });
  const double mean = probes::mean_cycles(cycles, sms);
  const double macs = static_cast<double>(steps) * 128 * 128 * 128; // a stage: 128 x 128 x 128
  std::printf("weights from %-4s %-8s %6.0f MACs/cycle/SM (%3.0f %%), %6.1f us, %5.2f TB/s "
              "loaded  (%s)\n",
              source,
              MODE == promote    ? "promote"
              : MODE == promote2 ? "promote2"
                                 : "none",
              macs / mean, 100 * macs / mean / 4096, ms * 1e3,
              static_cast<double>(steps) * k_stage_bytes * sms / (ms * 1e-3) / 1e12,
              cudaGetErrorString(cudaGetLastError()));
  cudaFree(cycles);
  cudaFree(sink);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // Token rows: one block's 128 rows (L2-resident, as GEMM2's intermediate mostly is). Weights:
  // Mixtral's 8 experts x 4096 rows (470 MB, HBM), or 8 tiles of 128 rows (L2).
  const size_t hbm_rows = 8 * 4096, l2_rows = 8 * 128;
  CUdeviceptr token_buffer, weight_buffer;
  cudaMalloc(reinterpret_cast<void**>(&token_buffer), 128 * k_k_bytes);
  cudaMalloc(reinterpret_cast<void**>(&weight_buffer), hbm_rows * k_k_bytes);
  cudaMemset(reinterpret_cast<void*>(token_buffer), 0x38, 128 * k_k_bytes);
  cudaMemset(reinterpret_cast<void*>(weight_buffer), 0x38, hbm_rows * k_k_bytes);
  TmaDesc tokens, hbm, l2;
  if (!probes::encode_box_map(tokens, token_buffer, k_k_bytes, 128) ||
      !probes::encode_box_map(hbm, weight_buffer, k_k_bytes, hbm_rows) ||
      !probes::encode_box_map(l2, weight_buffer, k_k_bytes, l2_rows)) {
    std::printf("cuTensorMapEncodeTiled failed\n");
    return 1;
  }
  for (int rep = 0; rep < 2; ++rep) {
    run<none>("HBM", tokens, hbm, hbm_rows / 128, sms);
    run<promote>("HBM", tokens, hbm, hbm_rows / 128, sms);
    run<promote2>("HBM", tokens, hbm, hbm_rows / 128, sms);
    run<none>("L2", tokens, l2, l2_rows / 128, sms);
    run<promote>("L2", tokens, l2, l2_rows / 128, sms);
    run<promote2>("L2", tokens, l2, l2_rows / 128, sms);
  }
  return 0;
}
