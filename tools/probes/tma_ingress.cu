// Probe: how many bytes a cycle each SM takes in through TMA when every SM streams 128-byte-wide
// boxes as the MoE GEMMs' producers do (kernels_src/moe/wgmma_pipeline.cuh), without MMAs: one
// CTA an SM, a producer thread issuing STAGES-deep stages of BOXES boxes of 128 rows x 128 bytes
// (128-byte swizzle, 256-byte L2 promotion) and a consumer warp releasing each stage as soon as
// it lands, or `hold` cycles after (a GEMM's consumers keep a stage while its MMAs run). Sources: a
// buffer that L2 holds (16 MB, read over and over) or one it cannot (8 GB). Prints bytes a cycle an
// SM (clock64) and the aggregate rate. Built by hand (ctest only compiles it, label probes; running
// it needs a GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o tma_ingress tools/probes/tma_ingress.cu -L/usr/local/cuda/lib64/stubs -lcuda
#include "probe_common.cuh"

#include <cstdio>

using namespace specjit_kernels;

constexpr int k_row_bytes = 16384; // a source row (K bytes); boxes step along it

template <int STAGES, int BOXES>
__global__ void __launch_bounds__(64, 1)
    ingress(const __grid_constant__ TmaDesc map, long long* cycles, int rows, int stages,
            int hold) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  constexpr unsigned k_stage_bytes = BOXES * 128 * 128;
  const unsigned base = (shared_address(smem) + 1023) & ~1023u;
  const unsigned full = shared_address(bars), empty = full + 8 * STAGES;
  probes::init_stage_barriers(full, empty, STAGES, 1);
  const long long t0 = clock64();
  if (threadIdx.x == 0) { // producer
    const int blocks = rows / 128;
#pragma unroll 1
    for (int i = 0; i < stages; ++i) {
      const int s = i % STAGES;
      mbarrier_wait(empty + 8 * s, ((i / STAGES) & 1) ^ 1);
      mbarrier_arrive_expect_tx(full + 8 * s, k_stage_bytes);
      // Each CTA walks its own rows along K, as a GEMM CTA streams its weight tile.
      const int k = (i % (k_row_bytes / 128)) * 128;
#pragma unroll
      for (int bx = 0; bx < BOXES; ++bx) {
        const int block = (blockIdx.x * BOXES + bx + (i / (k_row_bytes / 128)) * 997) % blocks;
        tma_load_3d(base + s * k_stage_bytes + bx * 128 * 128, &map, full + 8 * s, k, block * 128,
                    0);
      }
    }
  } else if (threadIdx.x == 32) { // consumer
#pragma unroll 1
    for (int i = 0; i < stages; ++i) {
      const int s = i % STAGES;
      mbarrier_wait(full + 8 * s, (i / STAGES) & 1);
      for (const long long h0 = clock64(); clock64() - h0 < hold;) {
      }
      mbarrier_arrive(empty + 8 * s);
    }
    cycles[blockIdx.x] = clock64() - t0;
  }
}

template <int STAGES, int BOXES>
void run(const char* source, CUdeviceptr buffer, size_t bytes, int sms, int hold = 0) {
  const int rows = static_cast<int>(bytes / k_row_bytes);
  TmaDesc desc;
  if (!probes::encode_box_map(desc, buffer, k_row_bytes, rows)) {
    std::printf("cuTensorMapEncodeTiled failed\n");
    return;
  }
  auto kernel = ingress<STAGES, BOXES>;
  static_assert(STAGES * BOXES * 128 * 128 + 1024 <= 200 * 1024, "the stages fit");
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  long long* cycles;
  cudaMalloc(&cycles, sms * sizeof(long long));
  const int stages = 4096;
  kernel<<<sms, 64, 200 * 1024>>>(desc, cycles, rows, 64, hold); // warm up (one CTA an SM)
  const float ms =
      probes::time_ms([&] { kernel<<<sms, 64, 200 * 1024>>>(desc, cycles, rows, stages, hold); });
  const double mean = probes::mean_cycles(cycles, sms);
  const double per_cta = static_cast<double>(stages) * BOXES * 128 * 128;
  std::printf("%-4s stages=%d boxes=%d (%3d KB a stage, %3d KB in flight) hold=%4d: %5.1f "
              "bytes/cycle/SM, %5.2f TB/s  (%s)\n",
              source, STAGES, BOXES, BOXES * 16, STAGES * BOXES * 16, hold, per_cta / mean,
              per_cta * sms / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  cudaFree(cycles);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t l2_bytes = size_t{16} << 20, hbm_bytes = size_t{8} << 30;
  CUdeviceptr l2_buffer, hbm_buffer;
  cudaMalloc(reinterpret_cast<void**>(&l2_buffer), l2_bytes);
  cudaMalloc(reinterpret_cast<void**>(&hbm_buffer), hbm_bytes);
  cudaMemset(reinterpret_cast<void*>(l2_buffer), 1, l2_bytes);
  cudaMemset(reinterpret_cast<void*>(hbm_buffer), 1, hbm_bytes);
  run<4, 1>("L2", l2_buffer, l2_bytes, sms);
  run<8, 1>("L2", l2_buffer, l2_bytes, sms);
  run<4, 2>("L2", l2_buffer, l2_bytes, sms);
  run<6, 2>("L2", l2_buffer, l2_bytes, sms);
  // From HBM, the rate against the bytes in flight an SM: 32 KB stages 2 to 6 deep, and 16 KB
  // stages 4 and 8 deep; then 32 KB stages 3 and 4 deep, each held 1200 cycles, as the f16-token
  // GEMM1's consumers hold its 32 KB weight stages (3 deep) while their MMAs run (at Mixtral
  // T = 256 Nsight Compute found neither HBM nor the tensor pipe busy).
  run<2, 2>("HBM", hbm_buffer, hbm_bytes, sms);
  run<3, 2>("HBM", hbm_buffer, hbm_bytes, sms);
  run<4, 2>("HBM", hbm_buffer, hbm_bytes, sms);
  run<6, 2>("HBM", hbm_buffer, hbm_bytes, sms);
  run<4, 1>("HBM", hbm_buffer, hbm_bytes, sms);
  run<8, 1>("HBM", hbm_buffer, hbm_bytes, sms);
  run<3, 2>("HBM", hbm_buffer, hbm_bytes, sms, 1200);
  run<4, 2>("HBM", hbm_buffer, hbm_bytes, sms, 1200);
  run<5, 2>("HBM", hbm_buffer, hbm_bytes, sms, 1200);
  run<6, 2>("HBM", hbm_buffer, hbm_bytes, sms, 1200);
  run<3, 2>("HBM", hbm_buffer, hbm_bytes, sms, 600);
  run<4, 2>("HBM", hbm_buffer, hbm_bytes, sms, 600);
  return 0;
}
