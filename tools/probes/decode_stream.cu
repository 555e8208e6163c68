// Probe: the shortest time one launch can stream a decode step's expert weights from HBM, with no
// MMAs, no routing and no epilogue: the bound that a fused (one-launch) decode kernel could reach
// at T = 1, where the two GEMMs run at 58-61 % of the weight-streaming floor (bytes / 4.46 TB/s).
// A grid of CTAs reads a weight matrix (rows of K bytes) as the MoE GEMMs' producers do: 128-byte
// x 128-row TMA boxes (128-byte swizzle, 256-byte L2 promotion) through a STAGES-deep ring, a
// consumer warp releasing each stage as it lands. The boxes are split evenly over the grid, each
// CTA a contiguous run of them along K (as split-K would). Timed as the benchmark times the GEMMs:
// a CUDA graph of back-to-back launches, each on the next of several copies of the weights (at
// least 160 MB of them), so no launch finds its bytes in the 50 MB L2 (median of 5 replays, us a
// launch). Also: the same bytes as two launches (GEMM1's rows, then GEMM2's), plain or the second
// programmatic (PDL, its CTAs prefetching a ring's worth), or as one launch that consumes GEMM2's
// rows only after a grid-wide count of GEMM1's (the dependency a one-launch decode kernel adds),
// at T = 1 and T = 4 (T = 16 with `large`); an empty kernel (the launch alone); and the same
// boxes from a packed copy (pieces of 32, 64 or 128 rows x 128 bytes, contiguous), through a
// rank-4 tensor map or by one bulk copy a piece (what the MoE GEMMs do with packed weights). With
// the argument `large`, the reads of the larger decode points (Mixtral T >= 16, DeepSeek and Qwen3
// T = 16) instead. Built by hand (ctest only compiles it, label probes; running it needs a GPU):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o decode_stream tools/probes/decode_stream.cu -L/usr/local/cuda/lib64/stubs -lcuda
#include "decode_stream_kernels.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace decode_stream;
using probes::floor_us;
using probes::graph_us;
using probes::rotation_copies;

// One weight matrix: rows x row_bytes (row_bytes a multiple of 128, rows of 128).
struct Matrix {
  long long rows, row_bytes;
  long long bytes() const { return rows * row_bytes; }
  long long boxes() const { return rows / 128 * (row_bytes / 128); }
};

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

// The packed copies' maps (pieces of `piece_rows` rows), as encode() does for the row-major ones.
std::vector<TmaDesc> encode_packed(CUdeviceptr base, long long copy_bytes, const Matrix& m,
                                   int piece_rows) {
  std::vector<TmaDesc> maps(rotation_copies(copy_bytes));
  const cuuint64_t k_pieces = static_cast<cuuint64_t>(m.row_bytes / 128),
                   piece = 128ull * piece_rows;
  const cuuint64_t dims[4] = {128, static_cast<cuuint64_t>(piece_rows), k_pieces,
                              static_cast<cuuint64_t>(m.rows / piece_rows)};
  const cuuint64_t strides[3] = {128, piece, piece * k_pieces};
  const cuuint32_t box[4] = {128, static_cast<cuuint32_t>(piece_rows), 1,
                             static_cast<cuuint32_t>(128 / piece_rows)};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  for (size_t c = 0; c < maps.size(); ++c) {
    CUtensorMap map;
    if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4,
                               reinterpret_cast<void*>(base + c * copy_bytes), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      std::printf("cuTensorMapEncodeTiled (packed) failed\n");
    std::memcpy(&maps[c], &map, sizeof(map));
  }
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

template <int STAGES>
void launch_packed(const TmaDesc& desc, const Matrix& m, int piece_rows, int ctas, cudaStream_t s) {
  packed<STAGES><<<ctas, 64, ring_smem(STAGES), s>>>(desc, static_cast<int>(m.row_bytes / 128),
                                                     m.boxes(), 128 / piece_rows);
}

// As one(), from the packed copy with pieces of piece_rows rows.
template <int STAGES>
void one_packed(const char* name, CUdeviceptr buffer, const Matrix& m, int piece_rows, int ctas) {
  const std::vector<TmaDesc> maps = encode_packed(buffer, round_up(m.bytes()), m, piece_rows);
  const double us = graph_us([&](int i, cudaStream_t s) {
    launch_packed<STAGES>(maps[i % maps.size()], m, piece_rows, ctas, s);
  });
  const double floor_time = floor_us(m.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d stages=%2d packed, %3d-row pieces: %6.2f us, floor "
              "%5.2f us (%.2f)  (%s)\n",
              name, m.bytes() / 1e6, ctas, STAGES, piece_rows, us, floor_time, floor_time / us,
              cudaGetErrorString(cudaGetLastError()));
}

// As two(), from packed copies.
template <int STAGES>
void two_packed(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2,
                int piece_rows, int ctas) {
  const long long copy = round_up(g1.bytes()) + round_up(g2.bytes());
  const std::vector<TmaDesc> m1 = encode_packed(buffer, copy, g1, piece_rows),
                             m2 =
                                 encode_packed(buffer + round_up(g1.bytes()), copy, g2, piece_rows);
  const double us = graph_us([&](int i, cudaStream_t s) {
    launch_packed<STAGES>(m1[i % m1.size()], g1, piece_rows, ctas, s);
    launch_packed<STAGES>(m2[i % m2.size()], g2, piece_rows, ctas, s);
  });
  const double floor_time = floor_us(g1.bytes() + g2.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d stages=%2d packed, %3d-row pieces, two launches: %6.2f "
              "us, floor %5.2f us (%.2f)  (%s)\n",
              name, (g1.bytes() + g2.bytes()) / 1e6, ctas, STAGES, piece_rows, us, floor_time,
              floor_time / us, cudaGetErrorString(cudaGetLastError()));
}

template <int STAGES>
void launch_pieces(const unsigned char* source, const Matrix& m, int piece_rows, int ctas,
                   cudaStream_t s) {
  bulk_pieces<STAGES><<<ctas, 64, ring_smem(STAGES), s>>>(
      source, static_cast<int>(m.row_bytes / 128), m.boxes(), 128 / piece_rows);
}

// As one_packed(), by bulk copies of the pieces (one launch, or with `then` GEMM2's after it).
template <int STAGES>
void pieces(const char* name, CUdeviceptr buffer, const Matrix& m, int piece_rows, int ctas,
            const Matrix* then = nullptr) {
  const long long first = round_up(m.bytes()), copy = first + (then ? round_up(then->bytes()) : 0),
                  copies = rotation_copies(copy);
  const double us = graph_us([&](int i, cudaStream_t s) {
    const auto* source = reinterpret_cast<const unsigned char*>(buffer + (i % copies) * copy);
    launch_pieces<STAGES>(source, m, piece_rows, ctas, s);
    if (then)
      launch_pieces<STAGES>(source + first, *then, piece_rows, ctas, s);
  });
  const long long bytes = m.bytes() + (then ? then->bytes() : 0);
  const double floor_time = floor_us(bytes);
  std::printf("%-22s %6.1f MB  ctas=%3d stages=%2d bulk pieces of %3d rows%s: %6.2f us, floor "
              "%5.2f us (%.2f)  (%s)\n",
              name, bytes / 1e6, ctas, STAGES, piece_rows, then ? ", two launches" : "", us,
              floor_time, floor_time / us, cudaGetErrorString(cudaGetLastError()));
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

// GEMM1's and GEMM2's maps over copies of the pair, GEMM2's rows after GEMM1's in each copy.
struct PairMaps {
  std::vector<TmaDesc> first, second;
};
PairMaps encode_pair(CUdeviceptr buffer, const Matrix& g1, const Matrix& g2) {
  const long long copy = round_up(g1.bytes()) + round_up(g2.bytes());
  return {encode(buffer, copy, g1), encode(buffer, copy, g2, round_up(g1.bytes()))};
}

// "stages=%2d" (and "+%2d" for a second launch's), as the other lines print it.
std::string stages_text(int first, int second = 0) {
  char text[32];
  std::snprintf(text, sizeof(text), second ? "stages=%2d+%2d" : "stages=%2d", first, second);
  return text;
}

// A pair's time a launch and its fraction of the floor; `form`: how it ran.
void report_pair(const char* name, const Matrix& g1, const Matrix& g2, int ctas,
                 const std::string& form, double us) {
  const double floor_time = floor_us(g1.bytes() + g2.bytes());
  std::printf("%-22s %6.1f MB  ctas=%3d %s: %6.2f us, floor %5.2f us (%.2f)  (%s)\n", name,
              (g1.bytes() + g2.bytes()) / 1e6, ctas, form.c_str(), us, floor_time, floor_time / us,
              cudaGetErrorString(cudaGetLastError()));
}

// GEMM1's rows then GEMM2's, two launches of STAGES stages on `ctas` CTAs each.
template <int STAGES>
void two(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2, int ctas) {
  const PairMaps m = encode_pair(buffer, g1, g2);
  const double us = graph_us([&](int i, cudaStream_t s) {
    launch<STAGES>(m.first[i % m.first.size()], g1, ctas, s);
    launch<STAGES>(m.second[i % m.second.size()], g2, ctas, s);
  });
  report_pair(name, g1, g2, ctas, stages_text(STAGES) + ", two launches", us);
}

// GEMM1's rows then GEMM2's in one launch of `ctas` CTAs of STAGES stages (phased: GEMM2's
// boxes consumed after a grid-wide count). `count`: a device word this zeroes first.
template <int STAGES>
void one_phased(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2, int ctas,
                unsigned* count) {
  // Every CTA counts itself at its first GEMM2 box, so each must have one (else: a hang).
  if (g2.boxes() < ctas) {
    std::printf("%-22s one launch: fewer GEMM2 boxes than %d CTAs, not run\n", name, ctas);
    return;
  }
  const PairMaps m = encode_pair(buffer, g1, g2);
  cudaMemset(count, 0, sizeof(unsigned));
  const double us = graph_us([&](int i, cudaStream_t s) {
    phased<STAGES><<<ctas, 64, ring_smem(STAGES), s>>>(
        m.first[i % m.first.size()], m.second[i % m.second.size()],
        static_cast<int>(g1.row_bytes / 128), g1.boxes(), static_cast<int>(g2.row_bytes / 128),
        g2.boxes(), count);
  });
  report_pair(name, g1, g2, ctas,
              stages_text(STAGES) + ", one launch, GEMM2 after a grid-wide count", us);
}

// GEMM1's rows on `ctas` CTAs of S1 stages, then GEMM2's on `ctas` CTAs of S2 stages launched
// programmatically (stream_pdl).
template <int S1, int S2>
void two_pdl(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2, int ctas) {
  const PairMaps m = encode_pair(buffer, g1, g2);
  const double us = graph_us([&](int i, cudaStream_t s) {
    stream_pdl<S1, 1><<<ctas, 64, ring_smem(S1), s>>>(
        m.first[i % m.first.size()], static_cast<int>(g1.row_bytes / 128), g1.boxes());
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(ctas);
    config.blockDim = dim3(64);
    config.dynamicSmemBytes = ring_smem(S2);
    config.stream = s;
    config.attrs = &attribute;
    config.numAttrs = 1;
    cudaLaunchKernelEx(&config, stream_pdl<S2, 2>, m.second[i % m.second.size()],
                       static_cast<int>(g2.row_bytes / 128), g2.boxes());
  });
  report_pair(name, g1, g2, ctas, stages_text(S1, S2) + ", two launches, the second programmatic",
              us);
}

// A layer's two weight streams three ways: two launches, the second programmatic, and one
// phased launch; `ctas` CTAs (the SMs) of STAGES stages, or twice as many of half as many.
void launch_forms(const char* name, CUdeviceptr buffer, const Matrix& g1, const Matrix& g2, int sms,
                  unsigned* count) {
  two<8>(name, buffer, g1, g2, sms);
  two_pdl<8, 4>(name, buffer, g1, g2, sms);
  two_pdl<6, 6>(name, buffer, g1, g2, sms);
  two_pdl<4, 4>(name, buffer, g1, g2, 2 * sms);
  one_phased<8>(name, buffer, g1, g2, sms, count);
  one_phased<12>(name, buffer, g1, g2, sms, count);
  one_phased<4>(name, buffer, g1, g2, 2 * sms, count);
}

// T = 1, top-8: the bytes a fused decode kernel would have to stream.
void decode_t1(CUdeviceptr buffer, int sms, unsigned* sink, unsigned* count) {
  // Eight experts' rows. Qwen3-30B-A3B: GEMM1 8 x 1536 rows of 2048 bytes, GEMM2 8 x 2048 rows
  // of 768; DeepSeek-V3 TP8: GEMM1 8 x 512 rows of 7168, GEMM2 8 x 7168 rows of 256. The pair's
  // bytes as one matrix of the same row length as GEMM1's (one launch over both).
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
  for (const auto& [name, m] :
       {std::pair{"qwen3 T=1 GEMM1", q1}, std::pair{"qwen3 T=1 GEMM2", q2},
        std::pair{"deepseek T=1 GEMM1", d1}, std::pair{"deepseek T=1 GEMM2", d2}})
    for (int piece_rows : {32, 128}) {
      one_packed<8>(name, buffer, m, piece_rows, sms);
      pieces<8>(name, buffer, m, piece_rows, sms);
    }
  two_packed<8>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, q2, 32, sms);
  two_packed<8>("deepseek T=1 GEMM1,2", buffer, d1, d2, 32, sms);
  pieces<8>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, 32, sms, &q2);
  pieces<8>("deepseek T=1 GEMM1,2", buffer, d1, 32, sms, &d2);
  two<8>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, q2, sms);
  two<12>("qwen3 T=1 GEMM1, GEMM2", buffer, q1, q2, sms);
  two<8>("deepseek T=1 GEMM1,2", buffer, d1, d2, sms);
  two<12>("deepseek T=1 GEMM1,2", buffer, d1, d2, sms);
  // Two launches against one: T = 1, and T = 4's mean experts (Qwen3 29, DeepSeek 31).
  launch_forms("qwen3 T=1 GEMM1,2", buffer, q1, q2, sms, count);
  launch_forms("deepseek T=1 GEMM1,2", buffer, d1, d2, sms, count);
  launch_forms("qwen3 T=4 GEMM1,2", buffer, Matrix{29 * 1536, 2048}, Matrix{29 * 2048, 768}, sms,
               count);
  launch_forms("deepseek T=4 GEMM1,2", buffer, Matrix{31 * 512, 7168}, Matrix{31 * 7168, 256}, sms,
               count);
}

// The decode points whose GEMMs stream at 0.89-0.96 of the floor, 1-4 % short of the peer:
// Mixtral-8x7B at T = 16 and 64 (all 8 experts: GEMM1 8 x 28672 rows of 4096 bytes, GEMM2
// 8 x 4096 rows of 14336) and DeepSeek-V3 TP8 at T = 16 (the benchmark's routing hits 106
// experts: GEMM1 106 x 512 rows of 7168 bytes, GEMM2 106 x 7168 rows of 256).
void decode_large(CUdeviceptr buffer, int sms, unsigned* sink, unsigned* count) {
  const Matrix m1{229376, 4096}, m2{32768, 14336};
  const Matrix d1{54272, 7168}, d2{759808, 256};
  for (const auto& [name, m] :
       {std::pair{"mixtral T>=16 GEMM1", m1}, std::pair{"mixtral T>=16 GEMM2", m2},
        std::pair{"deepseek T=16 GEMM1", d1}, std::pair{"deepseek T=16 GEMM2", d2}}) {
    one<4>(name, buffer, m, sms);
    one<8>(name, buffer, m, sms);
    one<4>(name, buffer, m, 2 * sms);
    one<4>(name, buffer, m, 4 * sms);
    flat<8>(name, buffer, m, sms, sink);
    flat<0>(name, buffer, m, 4 * sms, sink);
    for (int piece_rows : {32, 64, 128}) {
      one_packed<4>(name, buffer, m, piece_rows, 2 * sms);
      pieces<4>(name, buffer, m, piece_rows, 2 * sms);
    }
    pieces<8>(name, buffer, m, 32, sms);
    pieces<2>(name, buffer, m, 32, 4 * sms);
  }
  two_packed<4>("mixtral T>=16 GEMM1,2", buffer, m1, m2, 32, 2 * sms);
  two_packed<4>("deepseek T=16 GEMM1,2", buffer, d1, d2, 32, 2 * sms);
  pieces<4>("mixtral T>=16 GEMM1,2", buffer, m1, 32, 2 * sms, &m2);
  pieces<4>("deepseek T=16 GEMM1,2", buffer, d1, 32, 2 * sms, &d2);
  pieces<8>("mixtral T>=16 GEMM1,2", buffer, m1, 32, sms, &m2);
  pieces<8>("deepseek T=16 GEMM1,2", buffer, d1, 32, sms, &d2);
  two<4>("mixtral T>=16 GEMM1,2", buffer, m1, m2, 2 * sms);
  two<8>("mixtral T>=16 GEMM1,2", buffer, m1, m2, sms);
  two<4>("deepseek T=16 GEMM1,2", buffer, d1, d2, 2 * sms);
  two<8>("deepseek T=16 GEMM1,2", buffer, d1, d2, sms);
  launch_forms("mixtral T>=16 GEMM1,2", buffer, m1, m2, sms, count);
  launch_forms("deepseek T=16 GEMM1,2", buffer, d1, d2, sms, count);
  // Qwen3 T = 16's mean experts (82).
  launch_forms("qwen3 T=16 GEMM1,2", buffer, Matrix{82 * 1536, 2048}, Matrix{82 * 2048, 768}, sms,
               count);
}

// No argument: the T = 1 reads; `large`: the larger decode points'.
int main(int argc, char** argv) {
  const bool large = argc > 1 && std::string(argv[1]) == "large";
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  allow_smem<4>(stream<4>);
  allow_smem<6>(stream<6>);
  allow_smem<8>(stream<8>);
  allow_smem<12>(stream<12>);
  allow_smem<8>(bulk<8>);
  allow_smem<4>(packed<4>);
  allow_smem<8>(packed<8>);
  allow_smem<2>(bulk_pieces<2>);
  allow_smem<4>(bulk_pieces<4>);
  allow_smem<8>(bulk_pieces<8>);
  allow_smem<4>(phased<4>);
  allow_smem<8>(phased<8>);
  allow_smem<12>(phased<12>);
  allow_smem<4>(stream_pdl<4, 1>);
  allow_smem<6>(stream_pdl<6, 1>);
  allow_smem<8>(stream_pdl<8, 1>);
  allow_smem<4>(stream_pdl<4, 2>);
  allow_smem<6>(stream_pdl<6, 2>);
  unsigned *sink, *count;
  cudaMalloc(reinterpret_cast<void**>(&sink), sizeof(unsigned));
  cudaMalloc(reinterpret_cast<void**>(&count), sizeof(unsigned));
  // The copies of every matrix below (the large ones: one copy of Mixtral's 1.41 GB, which no
  // launch finds in L2 either).
  const size_t buffer_bytes = large ? size_t{1536} << 20 : size_t{512} << 20;
  CUdeviceptr buffer;
  cudaMalloc(reinterpret_cast<void**>(&buffer), buffer_bytes);
  cudaMemset(reinterpret_cast<void*>(buffer), 1, buffer_bytes);
  const double empty_us = graph_us([&](int, cudaStream_t s) { empty_kernel<<<sms, 64, 0, s>>>(); });
  std::printf("empty kernel, %d CTAs: %.2f us a launch\n", sms, empty_us);
  if (large)
    decode_large(buffer, sms, sink, count);
  else
    decode_t1(buffer, sms, sink, count);
  return 0;
}
