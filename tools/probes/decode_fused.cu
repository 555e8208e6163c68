// Probe: the MoE layer's two GEMMs at T = 1 (top 8, FP8 W8A8 per tensor) in one launch, to see
// how close one launch comes to the weight-streaming floor where the two wgmma GEMM launches
// reach 58-61 % of it (Qwen3-30B-A3B and DeepSeek-V3 TP8; decode_stream.cu: reads alone reach
// 0.80-0.87 in one launch, 0.68-0.70 in two).
//
// One CTA a SM, all resident. The CTAs split GEMM1's (slot, intermediate column) pairs and then
// GEMM2's (slot, output row) rows evenly; each streams its share as contiguous bulk copies
// (cp.async.bulk: a stage is up to 16 KB of whole rows, GEMM1's gate rows and their up rows
// together) through one ring, GEMM2's weights as soon as stages free up. At one token a row is a
// dot product, so the consumers are CUDA cores: 4 or 8 warps take the stages in turn, a row to
// `lanes` lanes (Rows), e4m3 -> f16 -> f32 exactly, fp32 sums, then GEMM1's epilogue (SiLU(gate)
// * up, e4m3 of value / a2 into the intermediate) or GEMM2's (times the router weight, bf16 per
// slot). A warp's first GEMM2 stage of a slot waits until every CTA has written that slot's
// intermediate row: per-slot counts, released by GEMM1's warps, never reset (each launch adds N
// to each; a launch's generation is its CTAs' ticket count / gridDim.x).
//
// Checked against a CPU reference on fresh random data (the intermediate byte for byte within
// one e4m3 step, GEMM2's outputs from the kernel's intermediate within bf16 rounding), then
// timed as the benchmark times the GEMMs (probe_common.cuh). Only the 8 experts' weights are
// laid out, slot j's expert j. Built by hand (ctest only compiles it, label probes):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
//        -o decode_fused tools/probes/decode_fused.cu
#include "decode_fused_layer.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace decode_fused;

float e4m3_value(unsigned char b) {
  const int exponent = (b >> 3) & 15, mantissa = b & 7;
  const float magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0f, -6)
                                        : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return b & 0x80 ? -magnitude : magnitude;
}

// Every e4m3 byte's value (NaN codes included as garbage: the data never holds them).
struct E4m3Table {
  float value[256];
  E4m3Table() {
    for (int b = 0; b < 256; ++b)
      value[b] = e4m3_value(static_cast<unsigned char>(b));
  }
  float operator()(unsigned char b) const { return value[b]; }
};

// Round to nearest e4m3 (ties to the even code), saturating at 448: the reference's quantization.
unsigned char e4m3_of(double v) {
  const double magnitude = std::fabs(v);
  unsigned char best = 0;
  double best_error = magnitude;
  for (unsigned char code = 1; code <= 0x7e; ++code) {
    const double error = std::fabs(e4m3_value(code) - magnitude);
    if (error < best_error || (error == best_error && (code & 1) == 0)) {
      best = code;
      best_error = error;
    }
  }
  return static_cast<unsigned char>(best | (v < 0 && best != 0 ? 0x80 : 0));
}

float bf16_value(unsigned short bits) {
  const unsigned word = static_cast<unsigned>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

// A random finite e4m3 value of magnitude 2^-3 .. 15, either sign.
unsigned char random_e4m3(std::mt19937& rng) {
  const unsigned r = rng();
  return static_cast<unsigned char>((r & 0x80) | ((4 + (r >> 8) % 7) << 3) | ((r >> 16) & 7));
}

// A layer's inputs on the host: the 8 experts' weights (w13, then w2), the token, the scales,
// and GEMM1's gated values in double (silu(gate) * up, before quantization).
struct HostLayer {
  int h, n;
  std::vector<unsigned char> weights, hidden;
  std::vector<float> w13_scale, w2_scale, router;
  float a1 = 0.05f, a2 = 0;
  std::vector<double> gated; // [8][N]
  long long w13_bytes() const { return 1LL * k_slots * 2 * n * h; }
  long long bytes() const { return w13_bytes() + 1LL * k_slots * h * n; }
};

const E4m3Table e4m3;

// Fresh random data, and a2 such that the largest gated value lands near 400.
HostLayer make_layer(int h, int n) {
  HostLayer l;
  l.h = h;
  l.n = n;
  std::mt19937 rng(std::random_device{}());
  l.weights.resize(l.bytes());
  l.hidden.resize(h);
  for (auto& b : l.weights)
    b = random_e4m3(rng);
  for (auto& b : l.hidden)
    b = random_e4m3(rng);
  std::uniform_real_distribution<float> scales(0.005f, 0.02f), routing(0.05f, 0.25f);
  for (int j = 0; j < k_slots; ++j) {
    l.w13_scale.push_back(scales(rng));
    l.w2_scale.push_back(scales(rng));
    l.router.push_back(routing(rng));
  }
  l.gated.resize(k_slots * n);
  double largest = 0;
  for (int j = 0; j < k_slots; ++j)
    for (int r = 0; r < n; ++r) {
      const unsigned char* gate = &l.weights[(1LL * j * 2 * n + r) * h];
      const unsigned char* up = gate + 1LL * n * h;
      double g = 0, u = 0;
      for (int k = 0; k < h; ++k) {
        g += e4m3(gate[k]) * e4m3(l.hidden[k]);
        u += e4m3(up[k]) * e4m3(l.hidden[k]);
      }
      const double scale = static_cast<double>(l.a1) * l.w13_scale[j];
      g *= scale;
      u *= scale;
      l.gated[j * n + r] = g / (1 + std::exp(-g)) * u;
      largest = std::max(largest, std::fabs(l.gated[j * n + r]));
    }
  l.a2 = static_cast<float>(largest / 400);
  return l;
}

// The kernel's outputs against the reference: the intermediate within one e4m3 step of the
// reference's quantization (the kernel's SiLU is approximate, its sums in another order), at most
// 2 % of it off at all; GEMM2 from the kernel's intermediate within bf16 rounding (2^-8
// relatively) of the double sums, plus the worst case of an fp32 sum of N terms (N * 2^-24 * the
// sum of their sizes). Prints the counts and the layer's error against float64 without
// re-quantizing the intermediate.
bool check(const char* name, const HostLayer& l, const std::vector<unsigned char>& intermediate,
           const std::vector<unsigned short>& out) {
  int off_by_one = 0, wrong = 0;
  for (int i = 0; i < k_slots * l.n; ++i) {
    const unsigned char want = e4m3_of(l.gated[i] / l.a2), got = intermediate[i];
    if (want == got)
      continue;
    const bool zero = (want & 0x7f) == 0 || (got & 0x7f) == 0;
    const bool same_sign = (want & 0x80) == (got & 0x80) || zero;
    if ((got & 0x7f) != 0x7f && same_sign && std::abs((want & 0x7f) - (got & 0x7f)) == 1)
      ++off_by_one;
    else
      ++wrong;
  }
  int outside = 0;
  double error2 = 0, norm2 = 0;
  for (int j = 0; j < k_slots; ++j)
    for (int c = 0; c < l.h; ++c) {
      const unsigned char* w = &l.weights[l.w13_bytes() + (1LL * j * l.h + c) * l.n];
      double sum = 0, size = 0, exact = 0;
      for (int k = 0; k < l.n; ++k) {
        const double term = e4m3(w[k]) * e4m3(intermediate[j * l.n + k]);
        sum += term;
        size += std::fabs(term);
        exact += e4m3(w[k]) * l.gated[j * l.n + k];
      }
      const double scale = static_cast<double>(l.a2) * l.w2_scale[j] * l.router[j];
      const double want = sum * scale, got = bf16_value(out[j * l.h + c]);
      if (!(std::fabs(got - want) <= std::fabs(want) / 256 + std::ldexp(l.n * size * scale, -24)))
        ++outside;
      const double layer = exact * l.w2_scale[j] * l.router[j];
      error2 += (got - layer) * (got - layer);
      norm2 += layer * layer;
    }
  const bool ok = wrong == 0 && off_by_one <= k_slots * l.n / 50 && outside == 0;
  std::printf("%s: %s: intermediate %d of %d one e4m3 step off, %d wrong; GEMM2 %d of %d outside "
              "bf16 rounding; layer error against float64 %.4f\n",
              name, ok ? "correct" : "WRONG", off_by_one, k_slots * l.n, wrong, outside,
              k_slots * l.h, std::sqrt(error2 / norm2));
  return ok;
}

// The layer on the device: `copies` copies of the weights (probes::rotation_copies), the
// poisoned outputs, the counts at zero.
struct DeviceLayer {
  unsigned char *buffer = nullptr, *hidden = nullptr, *intermediate = nullptr;
  unsigned short* out = nullptr;
  float* scales = nullptr;
  unsigned* counts = nullptr;
  long long copy = 0, copies = 0;
  LayerArgs args{};

  explicit DeviceLayer(const HostLayer& l)
      : copy(l.bytes()), copies(probes::rotation_copies(copy)) {
    cudaMalloc(&buffer, copies * copy);
    cudaMalloc(&hidden, l.h);
    cudaMalloc(&intermediate, k_slots * l.n);
    cudaMalloc(&out, k_slots * l.h * 2);
    cudaMalloc(&scales, 3 * k_slots * sizeof(float));
    cudaMalloc(&counts, (1 + k_slots) * sizeof(unsigned));
    for (long long c = 0; c < copies; ++c)
      cudaMemcpy(buffer + c * copy, l.weights.data(), copy, cudaMemcpyHostToDevice);
    cudaMemcpy(hidden, l.hidden.data(), l.h, cudaMemcpyHostToDevice);
    cudaMemcpy(scales, l.w13_scale.data(), k_slots * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(scales + k_slots, l.w2_scale.data(), k_slots * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(scales + 2 * k_slots, l.router.data(), k_slots * 4, cudaMemcpyHostToDevice);
    cudaMemset(counts, 0, (1 + k_slots) * sizeof(unsigned));
    cudaMemset(intermediate, 0xff, k_slots * l.n); // poisoned: e4m3 NaN
    cudaMemset(out, 0xff, k_slots * l.h * 2);      // bf16 NaN
    args = LayerArgs{buffer,
                     buffer + l.w13_bytes(),
                     hidden,
                     scales,
                     scales + k_slots,
                     scales + 2 * k_slots,
                     l.a1,
                     l.a2,
                     intermediate,
                     out,
                     counts};
  }
  DeviceLayer(const DeviceLayer&) = delete;
  DeviceLayer& operator=(const DeviceLayer&) = delete;
  ~DeviceLayer() {
    cudaFree(buffer);
    cudaFree(hidden);
    cudaFree(intermediate);
    cudaFree(out);
    cudaFree(scales);
    cudaFree(counts);
  }
  // Launch i's arguments: copy i % copies of the weights.
  LayerArgs rotated(int i) const {
    LayerArgs a = args;
    a.w13 = buffer + (i % copies) * copy;
    a.w2 = a.w13 + (args.w2 - args.w13);
    return a;
  }
};

// One shape and kernel form: a checked launch on fresh data, then, if correct, the timing.
template <int H, int N, int STAGES, int WARPS> bool run(const char* name, int sms) {
  constexpr int threads = k_threads<WARPS>, smem = layer_smem<H, STAGES>();
  auto kernel = fused_layer<H, N, STAGES, WARPS>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int resident = 0;
  const cudaError_t fits =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, threads, smem);
  if (fits != cudaSuccess || resident < 1) {
    std::printf("%s: the kernel does not fit on a SM (%d bytes of shared memory): %s\n", name, smem,
                cudaGetErrorString(fits));
    return false;
  }
  const HostLayer host = make_layer(H, N);
  const DeviceLayer device(host);
  kernel<<<sms, threads, smem>>>(device.args);
  const cudaError_t error = cudaDeviceSynchronize();
  std::vector<unsigned char> intermediate(k_slots * N);
  std::vector<unsigned short> out(k_slots * H);
  cudaMemcpy(intermediate.data(), device.intermediate, intermediate.size(), cudaMemcpyDeviceToHost);
  cudaMemcpy(out.data(), device.out, out.size() * 2, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) {
    std::printf("%s: the launch failed: %s\n", name, cudaGetErrorString(error));
    return false;
  }
  if (!check(name, host, intermediate, out))
    return false;
  const double us = probes::graph_us(
      [&](int i, cudaStream_t s) { kernel<<<sms, threads, smem, s>>>(device.rotated(i)); });
  const double floor_time = probes::floor_us(host.bytes());
  std::printf("%s: %d CTAs of %d consumer warps, %d stages of %d KB: %.2f us a layer (GEMM1 + "
              "GEMM2), floor %.2f us (%.2f)  (%s)\n",
              name, sms, WARPS, STAGES, k_stage_bytes / 1024, us, floor_time, floor_time / us,
              cudaGetErrorString(cudaGetLastError()));
  return true;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  bool ok = true;
  // Qwen3-30B-A3B: H = 2048, I = 768; DeepSeek-V3 TP8: H = 7168, I = 256 a shard.
  ok &= run<2048, 768, 8, 4>("qwen3 T=1", sms);
  ok &= run<2048, 768, 12, 4>("qwen3 T=1", sms);
  ok &= run<2048, 768, 12, 8>("qwen3 T=1", sms);
  ok &= run<7168, 256, 8, 4>("deepseek T=1", sms);
  ok &= run<7168, 256, 12, 4>("deepseek T=1", sms);
  ok &= run<7168, 256, 12, 8>("deepseek T=1", sms);
  return ok ? 0 : 1;
}
