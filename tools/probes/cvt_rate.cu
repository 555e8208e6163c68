// Probe: how fast an SM converts e4m3 to f16, the f16-token GEMM1's per-stage weight conversion
// (kernels_src/common/wgmma.cuh, e4m3x4_to_f16x4), against integer operations that do the same:
//   cvt   cvt.rn.f16x2.e4m3x2 (SASS F2FP.F16.E4M3.UNPACK_B), one f16x2 an instruction;
//   bits  prmt (each byte to the high byte of a 16-bit half), shift, two lop3: the f16x2 of
//         (e4m3 value) / 256, exact (scale folded elsewhere), four integer instructions;
//   lop3  one lop3 an f16x2, for the integer pipe's rate.
// Each thread runs 8 independent chains; one CTA of 1024 threads an SM. Prints f16x2 results a
// cycle an SM (clock64 around the loop). Built by hand (ctest only compiles it, label probes;
// running it needs a GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o cvt_rate tools/probes/cvt_rate.cu
#include "probe_common.cuh"

#include <cuda_fp16.h>

#include <cstdio>

using namespace specjit_kernels;

enum Mode { cvt, bits, lop3 };

template <Mode MODE> __device__ __forceinline__ unsigned step(unsigned x) {
  unsigned y;
  if constexpr (MODE == cvt) {
    asm volatile("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}\n"
                 : "=r"(y)
                 : "r"(x));
  } else if constexpr (MODE == bits) {
    unsigned p, s;
    asm volatile("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(p) : "r"(x));
    s = p >> 1;
    // (s & 0x3f803f80) | (p & 0x80008000)
    asm volatile("lop3.b32 %0, %1, 0x3f803f80, %2, 0xea;" : "=r"(y) : "r"(s), "r"(p & 0x80008000u));
  } else {
    asm volatile("lop3.b32 %0, %1, 0x3f803f80, %1, 0x96;" : "=r"(y) : "r"(x));
  }
  return y;
}

template <Mode MODE>
__global__ void __launch_bounds__(1024, 1) rate(long long* cycles, unsigned* sink, int iters) {
  unsigned v[8];
  for (int i = 0; i < 8; ++i)
    v[i] = threadIdx.x * 0x01010101u + i;
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 1
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = step<MODE>(v[i]) ^ it;
  __syncthreads();
  const long long t1 = clock64();
  unsigned x = 0;
  for (int i = 0; i < 8; ++i)
    x ^= v[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = x;
  if (threadIdx.x == 0)
    cycles[blockIdx.x] = t1 - t0;
}

// Whether `bits` is `cvt` / 256 for every pair of e4m3 values but NaN (0x7f, 0xff).
__global__ void check(int* mismatches) {
  const unsigned x = blockIdx.x * blockDim.x + threadIdx.x; // two e4m3 bytes
  const unsigned a = step<cvt>(x), b = step<bits>(x);
  for (int h = 0; h < 2; ++h) {
    const unsigned byte = (x >> (8 * h)) & 0xff;
    const float want = __half2float(__ushort_as_half(static_cast<unsigned short>(a >> (16 * h))));
    const float got = __half2float(__ushort_as_half(static_cast<unsigned short>(b >> (16 * h))));
    if ((byte & 0x7f) != 0x7f && got * 256.0f != want)
      atomicAdd(mismatches, 1);
  }
}

template <Mode MODE> void run(const char* name, int sms, long long* cycles, unsigned* sink) {
  const int iters = 4096;
  rate<MODE><<<sms, 1024>>>(cycles, sink, iters);
  cudaDeviceSynchronize();
  const double mean = probes::mean_cycles(cycles, sms);
  std::printf("%-5s %6.1f f16x2 a cycle an SM (%s)\n", name, 1024.0 * 8 * iters / mean,
              cudaGetErrorString(cudaGetLastError()));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* cycles;
  unsigned* sink;
  cudaMalloc(&cycles, sms * sizeof(long long));
  cudaMalloc(&sink, sms * 1024 * sizeof(unsigned));
  int* mismatches;
  cudaMalloc(&mismatches, sizeof(int));
  cudaMemset(mismatches, 0, sizeof(int));
  check<<<256, 256>>>(mismatches);
  int host = -1;
  cudaMemcpy(&host, mismatches, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("bits = cvt / 256 for all e4m3 pairs but NaN: %d mismatches\n", host);
  for (int r = 0; r < 2; ++r) {
    run<cvt>("cvt", sms, cycles, sink);
    run<bits>("bits", sms, cycles, sink);
    run<lop3>("lop3", sms, cycles, sink);
  }
  return 0;
}
