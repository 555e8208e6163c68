// Probe: the tensor-pipe rate of wgmma from shared memory on one SM, in the K-loop shapes of the
// MoE GEMMs (kernels_src/moe/wgmma_consume.cuh), without loads: each CTA (one an SM) issues
// 128-byte stages of four m64nNk32 e4m3 (or m64nNk16 bf16) MMAs, both operands from shared
// memory, and
//   promote  waits for each stage's MMAs and adds their sums into fp32 totals (the FP8 GEMM2);
//   turns    promote, the two warpgroups issuing their stages in turns (named barriers 8, 9);
//   promote2 promote every second stage;
//   drain    accumulates in the MMAs but waits for each stage's (no promotion);
//   flight   accumulates, one stage's MMAs in flight while the next is issued (the bf16 GEMM2).
// Prints MACs a cycle an SM (clock64 around the loop). Built by hand (ctest only compiles it, label
// probes; running it needs a GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o wgmma_rate tools/probes/wgmma_rate.cu
#include "probe_common.cuh"

#include <cstdio>

using namespace specjit_kernels;

enum Mode { promote, turns, promote2, drain, flight };

template <WgmmaType T, int N, int WGS, Mode MODE>
__global__ void __launch_bounds__(128 * WGS, 1) rate(long long* cycles, float* sink, int stages) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (shared_address(smem) + 1023) & ~1023u;
  for (int i = threadIdx.x; i < (64 * WGS + N) * 8; i += blockDim.x)
    store_shared_u32x4(base + i * 16, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u);
  fence_proxy_async_shared();
  __syncthreads();
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  const unsigned long long a = wgmma_desc_sw128(base + wg * 64 * 128);
  const unsigned long long b = wgmma_desc_sw128(base + 64 * WGS * 128);
  float acc[N / 2];
  constexpr bool k_promote = MODE == promote || MODE == turns || MODE == promote2;
  float part[k_promote ? N / 2 : 1];
  for (int i = 0; i < N / 2; ++i)
    acc[i] = 0.0f;
  const long long t0 = clock64();
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    if constexpr (k_promote) {
      if (MODE == turns && (wg == 1 || s > 0))
        named_barrier(8 + (wg ^ 1), 256); // the other warpgroup's turn has been issued
      const bool first = MODE != promote2 || s % 2 == 0;
      fence_registers<N / 2>(part);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        Wgmma<T, N>::mma(part, a + 2 * ks, b + 2 * ks, (ks != 0) | !first);
      wgmma_commit();
      if (MODE == turns && (wg == 0 || s + 1 < stages))
        asm volatile("bar.arrive %0, 256;" ::"r"(8 + wg) : "memory");
      fence_registers<N / 2>(part);
      if (MODE == promote2 && s % 2 == 0 && s + 1 < stages)
        continue;
      wgmma_wait<0>();
      fence_registers<N / 2>(part);
#pragma unroll
      for (int i = 0; i < N / 2; ++i)
        acc[i] += part[i];
    } else {
      fence_registers<N / 2>(acc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        Wgmma<T, N>::mma(acc, a + 2 * ks, b + 2 * ks, 1);
      wgmma_commit();
      fence_registers<N / 2>(acc);
      if constexpr (MODE == drain)
        wgmma_wait<0>();
      else
        wgmma_wait<1>();
    }
  }
  wgmma_wait<0>();
  fence_registers<N / 2>(acc);
  const long long t1 = clock64();
  float sum = 0.0f;
  for (int i = 0; i < N / 2; ++i)
    sum += acc[i];
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = t1 - t0;
    sink[blockIdx.x] = sum;
  }
}

template <WgmmaType T, int N, int WGS, Mode MODE> void run(int sms) {
  constexpr int k_stages = 20000;
  auto kernel = rate<T, N, WGS, MODE>;
  const int smem = 200 * 1024; // one CTA an SM
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  long long* cycles;
  float* sink;
  cudaMalloc(&cycles, sms * sizeof(long long));
  cudaMalloc(&sink, sms * sizeof(float));
  kernel<<<sms, 128 * WGS, smem>>>(cycles, sink, 100); // warm up
  kernel<<<sms, 128 * WGS, smem>>>(cycles, sink, k_stages);
  const double mean = probes::mean_cycles(cycles, sms);
  const cudaError_t err = cudaGetLastError();
  const double k = T == WgmmaType::e4m3 ? 32 : 16;
  const double macs = static_cast<double>(k_stages) * 4 * 64 * N * k * WGS;
  std::printf("%-6s N=%-3d warpgroups=%d %-8s %7.0f MACs/cycle/SM  (%s)\n",
              T == WgmmaType::e4m3 ? "e4m3" : "bf16", N, WGS,
              MODE == promote    ? "promote"
              : MODE == turns    ? "turns"
              : MODE == promote2 ? "promote2"
              : MODE == drain    ? "drain"
                                 : "flight",
              macs / mean, err == cudaSuccess ? "ok" : cudaGetErrorString(err));
  cudaFree(cycles);
  cudaFree(sink);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  run<WgmmaType::e4m3, 128, 2, promote>(sms);
  run<WgmmaType::e4m3, 128, 2, turns>(sms);
  run<WgmmaType::e4m3, 128, 2, promote2>(sms);
  run<WgmmaType::e4m3, 128, 2, drain>(sms);
  run<WgmmaType::e4m3, 128, 2, flight>(sms);
  run<WgmmaType::e4m3, 128, 1, promote>(sms);
  run<WgmmaType::e4m3, 128, 1, flight>(sms);
  run<WgmmaType::e4m3, 256, 2, drain>(sms);
  run<WgmmaType::e4m3, 256, 2, flight>(sms);
  run<WgmmaType::e4m3, 256, 1, flight>(sms);
  run<WgmmaType::bf16, 128, 2, flight>(sms);
  run<WgmmaType::bf16, 256, 2, drain>(sms);
  run<WgmmaType::bf16, 256, 2, flight>(sms);
  return 0;
}
