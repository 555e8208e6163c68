// Scaffolding the probes in tools/probes share: a TMA tensor map in the MoE GEMMs' layout, a
// stage ring's barriers, a timed launch, the mean of the per-CTA cycle counts the probe kernels
// record, a CTA's even share of the grid's work, and the benchmark's way of timing a launch
// (graph replay over rotating copies of the weights) with its floor rate.
#pragma once

#include "common/wgmma.cuh"

#include <cuda.h>

#include <algorithm>
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

// A CTA's even share of `items` over the grid: its first item and how many.
__device__ __forceinline__ long long share_first(long long items) {
  return items * blockIdx.x / gridDim.x;
}
__device__ __forceinline__ int share_count(long long items) {
  return static_cast<int>(items * (blockIdx.x + 1) / gridDim.x - share_first(items));
}

// Timing as the benchmark times the GEMMs: a CUDA graph of k_launches launches, each on the next
// of several copies of its weights, which together span at least k_rotation bytes, so that no
// launch finds its bytes in the 50 MB L2; the floor at the benchmark's 4.46 TB/s.
inline constexpr int k_launches = 30;
inline constexpr long long k_rotation = 160 << 20;
inline constexpr double k_floor_bytes_per_us = 4.46e6;

// Copies of copy_bytes each that span at least k_rotation bytes.
inline long long rotation_copies(long long copy_bytes) {
  return (k_rotation + copy_bytes - 1) / copy_bytes;
}
inline double floor_us(long long bytes) { return bytes / k_floor_bytes_per_us; }

// us a launch: the median over 5 replays of a graph of k_launches launches of `enqueue(i, s)`.
template <class Enqueue> double graph_us(Enqueue&& enqueue) {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < k_launches; ++i)
    enqueue(i, stream);
  cudaStreamEndCapture(stream, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphLaunch(exec, stream); // warm up
  cudaStreamSynchronize(stream);
  std::vector<double> us;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(start, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(ms * 1e3 / k_launches);
  }
  std::sort(us.begin(), us.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return us[2];
}

} // namespace probes
