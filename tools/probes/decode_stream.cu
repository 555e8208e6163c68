// Probe: the shortest time one launch can stream a decode step's expert weights from HBM, with no
// MMAs, no routing and no epilogue: the bound that a fused (one-launch) decode kernel could reach
// at T = 1, where the two GEMMs run at 58-61 % of the weight-streaming floor (bytes / 4.46 TB/s).
// A grid of CTAs reads a weight matrix (rows of K bytes) as the MoE GEMMs' producers do: 128-byte
// x 128-row TMA boxes (128-byte swizzle, 256-byte L2 promotion) through a STAGES-deep ring, a
// consumer warp releasing each stage as it lands. The boxes are split evenly over the grid, each
// CTA a contiguous run of them along K (as split-K would). Timed as the benchmark times the GEMMs:
// a CUDA graph of back-to-back launches, each on the next of several copies of the weights (at
// least 160 MB of them), so no launch finds its bytes in the 50 MB L2 (median of 5 replays, us a
// launch). Also: the same bytes as two launches (GEMM1's rows, then GEMM2's), and an empty kernel
// (the launch alone). Built by hand (ctest only compiles it, label probes; running it needs a
// GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o decode_stream tools/probes/decode_stream.cu -L/usr/local/cuda/lib64/stubs -lcuda
#include "probe_common.cuh"

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace specjit_kernels;

constexpr int k_box_bytes = 128 * 128;
constexpr int k_launches = 30;                  // a graph
constexpr long long k_rotation = 160 << 20;     // the bytes the copies of a matrix span at least
constexpr double k_floor_bytes_per_us = 4.46e6; // the benchmark's floor rate, 4.46 TB/s

// Dynamic shared memory of a ring of `stages` boxes (and the 1024-byte alignment slack).
constexpr int ring_smem(int stages) { return stages * k_box_bytes + 1024; }
// Copies of copy_bytes each that span at least k_rotation bytes.
long long rotation_copies(long long copy_bytes) {
  return (k_rotation + copy_bytes - 1) / copy_bytes;
}
double floor_us(long long bytes) { return bytes / k_floor_bytes_per_us; }

// One weight matrix: rows x row_bytes (row_bytes a multiple of 128, rows of 128).
struct Matrix {
  long long rows, row_bytes;
  long long bytes() const { return rows * row_bytes; }
  long long boxes() const { return rows / 128 * (row_bytes / 128); }
};

// A CTA's even share of `boxes` 16 KB boxes through a STAGES-deep ring: thread 0 requests box
// `first + i` into stage address `dst` on barrier `bar` (request(dst, box, bar), which completes
// the barrier's 16 KB), thread 32 releases each stage as soon as it lands.
template <int STAGES, class Request>
__device__ __forceinline__ void ring(long long boxes, Request&& request) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  const unsigned base = (shared_address(smem) + 1023) & ~1023u;
  const unsigned full = shared_address(bars), empty = full + 8 * STAGES;
  probes::init_stage_barriers(full, empty, STAGES, 1);
  const long long first = boxes * blockIdx.x / gridDim.x;
  const int count = static_cast<int>(boxes * (blockIdx.x + 1) / gridDim.x - first);
  if (threadIdx.x == 0) { // producer
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      const int s = i % STAGES;
      mbarrier_wait(empty + 8 * s, ((i / STAGES) & 1) ^ 1);
      mbarrier_arrive_expect_tx(full + 8 * s, k_box_bytes);
      request(base + s * k_box_bytes, first + i, full + 8 * s);
    }
  } else if (threadIdx.x == 32) { // consumer
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      const int s = i % STAGES;
      mbarrier_wait(full + 8 * s, (i / STAGES) & 1);
      mbarrier_arrive(empty + 8 * s);
    }
  }
}

// The weight rows as the GEMMs' producers read them: box (row block box / k_boxes, 128 bytes
// of K at box % k_boxes), through the tensor map.
template <int STAGES>
__global__ void __launch_bounds__(64, 1)
    stream(const __grid_constant__ TmaDesc map, int k_boxes, long long boxes) {
  ring<STAGES>(boxes, [&](unsigned dst, long long box, unsigned bar) {
    tma_load_3d(dst, &map, bar, static_cast<int>(box % k_boxes) * 128,
                static_cast<int>(box / k_boxes) * 128, 0);
  });
}

// The same bytes as contiguous 16 KB pieces (one cp.async.bulk each, no tensor map): whether the
// boxes' 128-byte row segments cost anything.
template <int STAGES>
__global__ void __launch_bounds__(64, 1) bulk(const unsigned char* source, long long boxes) {
  ring<STAGES>(boxes, [&](unsigned dst, long long box, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];" ::"r"(dst),
                 "l"(source + box * k_box_bytes), "r"(k_box_bytes), "r"(bar)
                 : "memory");
  });
}

// The same bytes read by every thread, 16 bytes a load, 8 loads in flight a thread (no TMA).
__global__ void __launch_bounds__(512) loads(const uint4* source, long long words, unsigned* sink) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  unsigned x = 0;
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i + u * stride < words ? __ldg(source + i + u * stride) : uint4{};
#pragma unroll
    for (int u = 0; u < 8; ++u)
      x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (x == 0x9e3779b9u) // never for the buffer's bytes; keeps the loads
    *sink = x;
}

__global__ void empty_kernel() {}

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

// Maps of consecutive copies of m from `base` on (`offset` bytes into each copy), spanning at
// least k_rotation bytes; launch i reads copy i % size().
std::vector<TmaDesc> encode(CUdeviceptr base, long long copy_bytes, const Matrix& m,
                            long long offset = 0) {
  std::vector<TmaDesc> maps(rotation_copies(copy_bytes));
  for (size_t c = 0; c < maps.size(); ++c)
    if (!probes::encode_box_map(maps[c], base + c * copy_bytes + offset, m.row_bytes, m.rows))
      std::printf("cuTensorMapEncodeTiled failed\n");
  return maps;
}

long long round_up(long long bytes) { return (bytes + 4095) & ~4095LL; }

template <int STAGES> void launch(const TmaDesc& desc, const Matrix& m, int ctas, cudaStream_t s) {
  stream<STAGES>
      <<<ctas, 64, ring_smem(STAGES), s>>>(desc, static_cast<int>(m.row_bytes / 128), m.boxes());
}

// Lets `kernel` (a ring of STAGES boxes) take its shared memory.
template <int STAGES, class Kernel> void allow_smem(Kernel kernel) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_smem(STAGES));
}

// One launch over m, `ctas` CTAs of STAGES stages; prints us and the fraction of the floor.
template <int STAGES> void one(const char* name, CUdeviceptr buffer, const Matrix& m, int ctas) {
  const std::vector<TmaDesc> maps = encode(buffer, round_up(m.bytes()), m);
  const double us =
      graph_us([&](int i, cudaStream_t s) { launch<STAGES>(maps[i % maps.size()], m, ctas, s); });
  const double floor_time = floor_us(m.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d stages=%2d (%3d KB in flight a CTA): %6.2f us, floor "
              "%5.2f us (%.2f), %.2f TB/s  (%s)\n",
              name, m.bytes() / 1e6, ctas, STAGES, STAGES * 16, us, floor_time, floor_time / us,
              m.bytes() / us / 1e6, cudaGetErrorString(cudaGetLastError()));
}

// The same bytes as contiguous pieces: cp.async.bulk (STAGES > 0) or plain loads (STAGES = 0).
template <int STAGES>
void flat(const char* name, CUdeviceptr buffer, const Matrix& m, int ctas, unsigned* sink) {
  const long long copy = round_up(m.bytes()), copies = rotation_copies(copy);
  const double us = graph_us([&](int i, cudaStream_t s) {
    const auto* source = reinterpret_cast<const unsigned char*>(buffer + (i % copies) * copy);
    if constexpr (STAGES > 0)
      bulk<STAGES><<<ctas, 64, ring_smem(STAGES), s>>>(source, m.boxes());
    else
      loads<<<ctas, 512, 0, s>>>(reinterpret_cast<const uint4*>(source), m.bytes() / 16, sink);
  });
  const double floor_time = floor_us(m.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d %-24s: %6.2f us, floor %5.2f us (%.2f)  (%s)\n", name,
              m.bytes() / 1e6, ctas, STAGES > 0 ? "bulk copies, 16 KB each" : "16-byte loads", us,
              floor_time, floor_time / us, cudaGetErrorString(cudaGetLastError()));
}

// GEMM1's rows then GEMM2's, two launches of STAGES stages on `ctas` CTAs each.
template <int STAGES>
void two(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2, int ctas) {
  const long long copy = round_up(g1.bytes()) + round_up(g2.bytes());
  const std::vector<TmaDesc> m1 = encode(buffer, copy, g1),
                             m2 = encode(buffer, copy, g2, round_up(g1.bytes()));
  const double us = graph_us([&](int i, cudaStream_t s) {
    launch<STAGES>(m1[i % m1.size()], g1, ctas, s);
    launch<STAGES>(m2[i % m2.size()], g2, ctas, s);
  });
  const double floor_time = floor_us(g1.bytes() + g2.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d stages=%2d, two launches: %6.2f us, floor %5.2f us "
              "(%.2f)  (%s)\n",
              name, (g1.bytes() + g2.bytes()) / 1e6, ctas, STAGES, us, floor_time, floor_time / us,
              cudaGetErrorString(cudaGetLastError()));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  allow_smem<4>(stream<4>);
  allow_smem<6>(stream<6>);
  allow_smem<8>(stream<8>);
  allow_smem<12>(stream<12>);
  allow_smem<8>(bulk<8>);
  unsigned* sink;
  cudaMalloc(reinterpret_cast<void**>(&sink), sizeof(unsigned));
  const size_t buffer_bytes = size_t{512} << 20; // the copies of every matrix below
  CUdeviceptr buffer;
  cudaMalloc(reinterpret_cast<void**>(&buffer), buffer_bytes);
  cudaMemset(reinterpret_cast<void*>(buffer), 1, buffer_bytes);
  const double empty_us = graph_us([&](int, cudaStream_t s) { empty_kernel<<<sms, 64, 0, s>>>(); });
  std::printf("empty kernel, %d CTAs: %.2f us a launch\n", sms, empty_us);
  // T = 1, top-8: eight experts' rows. Qwen3-30B-A3B: GEMM1 8 x 1536 rows of 2048 bytes, GEMM2
  // 8 x 2048 rows of 768; DeepSeek-V3 TP8: GEMM1 8 x 512 rows of 7168, GEMM2 8 x 7168 rows of 256.
  // The pair's bytes as one matrix of the same row length as GEMM1's (one launch over both).
  const Matrix q1{12288, 2048}, q2{16384, 768}, q12{18432, 2048};
  const Matrix d1{4096, 7168}, d2{57344, 256}, d12{6144, 7168};
  for (const auto& [name, m] :
       {std::pair{"qwen3 T=1 GEMM1", q1}, std::pair{"qwen3 T=1 GEMM2", q2},
        std::pair{"qwen3 T=1 both", q12}, std::pair{"deepseek T=1 GEMM1", d1},
        std::pair{"deepseek T=1 GEMM2", d2}, std::pair{"deepseek T=1 both", d12}}) {
    one<4>(name, buffer, m, sms);
    one<8>(name, buffer, m, sms);
    one<12>(name, buffer, m, sms);
    one<4>(name, buffer, m, 2 * sms);
    one<8>(name, buffer, m, 2 * sms);
    flat<8>(name, buffer, m, sms, sink);
    flat<0>(name, buffer, m, sms, sink);
    flat<0>(name, buffer, m, 4 * sms, sink);
  }
  // GEMM1's grids at T = 1 (the table's tiles): Qwen3 8 blocks x 12 tiles of 128 rows, DeepSeek
  // 8 x 4 tiles of 128 rows x split-K 4.
  one<8>("qwen3 T=1 GEMM1", buffer, q1, 96);
  one<8>("qwen3 T=1 GEMM1", buffer, q1, 192);
  one<6>("deepseek T=1 GEMM1", buffer, d1, 128);
  two<8>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, q2, sms);
  two<12>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, q2, sms);
  two<8>("deepseek T=1 GEMM1,2", buffer, d1, d2, sms);
  two<12>("deepseek T=1 GEMM1,2", buffer, d1, d2, sms);
  return 0;
}
