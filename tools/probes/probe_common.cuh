// Scaffolding the probes in tools/probes share: a TMA tensor map in the MoE GEMMs' layout, a
// stage ring's barriers, a timed launch and the mean of the per-CTA cycle counts the probe
// kernels record.
#pragma once

#include "common/wgmma.cuh"

#include <cuda.h>

#include <cstring>
#include <vector>

namespace probes {

// A rank-3 u8 map over `rows` rows of `row_bytes` at `base`, in boxes of 128 bytes x 128 rows,
// 128-byte swizzle and 256-byte L2 promotion (runtime/tensor_map.cpp's settings). False when the
// driver refuses it.
inline bool encode_box_map(specjit_kernels::TmaDesc& desc, CUdeviceptr base, cuuint64_t row_bytes,
                           cuuint64_t rows) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {row_bytes, rows, 1};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * rows};
  const cuuint32_t box[3] = {128, 128, 1}, element_strides[3] = {1, 1, 1};
  if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, reinterpret_cast<void*>(base),
                             dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  static_assert(sizeof(specjit_kernels::TmaDesc) == sizeof(CUtensorMap), "a CUtensorMap");
  std::memcpy(&desc, &map, sizeof(map));
  return true;
}

// Milliseconds of the work `launch` enqueues on the default stream.
template <class Launch> float time_ms(Launch&& launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  launch();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// The mean of the `ctas` cycle counts at `cycles` (device memory, one a CTA).
inline double mean_cycles(const long long* cycles, int ctas) {
  std::vector<long long> host(ctas);
  cudaMemcpy(host.data(), cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost);
  double mean = 0;
  for (long long c : host)
    mean += static_cast<double>(c) / ctas;
  return mean;
}

// Thread 0 sets up a ring of `stages` stages: `full` barriers completed by one arrival (the TMA
// issuer's arrive_expect_tx), `empty` ones by `empty_arrivals`; then the CTA meets.
__device__ inline void init_stage_barriers(unsigned full, unsigned empty, int stages,
                                           int empty_arrivals) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      specjit_kernels::mbarrier_init(full + 8 * s, 1);
      specjit_kernels::mbarrier_init(empty + 8 * s, empty_arrivals);
    }
    specjit_kernels::mbarrier_init_fence();
  }
  __syncthreads();
}

} // namespace probes
