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
#include "probe_common.cuh"

#include "common/fp8.cuh"
#include "moe/moe_common.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace specjit_kernels;
using probes::share_count;
using probes::share_first;

constexpr int k_slots = 8;           // T = 1, top 8: slot j runs expert j
constexpr int k_stage_bytes = 16384; // of whole rows

// WARPS consumer warps and the producer warp.
template <int WARPS> inline constexpr int k_threads = 32 * (WARPS + 1);

// A row of K e4m3 bytes: `vectors` 16-byte pieces, `lanes` lanes a row (the largest power of two
// up to 32 dividing `vectors`), `per_lane` pieces a lane, `rows_a_step` rows a warp at a time.
constexpr int lanes_for(int vectors) {
  int lanes = 32;
  while (vectors % lanes != 0)
    lanes /= 2;
  return lanes;
}
template <int K> struct Rows {
  static_assert(K % 16 == 0, "rows of whole 16-byte pieces");
  static constexpr int vectors = K / 16;
  static constexpr int lanes = lanes_for(vectors);
  static constexpr int per_lane = vectors / lanes;
  static constexpr int rows_a_step = 32 / lanes;
};

struct LayerArgs {
  const unsigned char* w13;    // [8][2N][H]: expert j's gate rows, then its up rows
  const unsigned char* w2;     // [8][H][N]
  const unsigned char* hidden; // [H], the token
  const float* w13_scale;      // [8]
  const float* w2_scale;       // [8]
  const float* router;         // [8], the top-8 weights
  float a1, a2;                // the activations' scales
  unsigned char* intermediate; // [8][N] e4m3
  unsigned short* out;         // [8][H] bf16, per slot
  unsigned* counts;            // [0]: CTA tickets; [1 + j]: slot j's intermediate columns written
};

// A stage's work: `count` pairs of GEMM1 (gate and up row `first` on, of slot `slot`) or rows of
// GEMM2, never across slots.
struct Piece {
  bool gemm2;
  int slot, first, count;
};

// The CTA's pieces in order, the same sequence for the producer and each consumer warp.
template <int H, int N> struct Pieces {
  static constexpr int pairs_a_stage = k_stage_bytes / (2 * H);
  static constexpr int rows_a_stage = k_stage_bytes / N;
  static_assert(pairs_a_stage >= 1 && rows_a_stage >= 1, "a stage holds a pair of GEMM1 rows");
  long long pair, pair_end, row, row_end; // the GEMM1 pairs and GEMM2 rows left: [at, end)

  __device__ Pieces()
      : pair(share_first(k_slots * N)), pair_end(pair + share_count(k_slots * N)),
        row(share_first(k_slots * H)), row_end(row + share_count(k_slots * H)) {}

  __device__ bool next(Piece& p) {
    auto take = [&](long long& at, long long end, int per_slot, int most, bool gemm2) {
      p.gemm2 = gemm2;
      p.slot = static_cast<int>(at / per_slot);
      p.first = static_cast<int>(at % per_slot);
      const long long left = end - at;
      p.count = static_cast<int>(left < most ? left : most);
      if (p.count > per_slot - p.first)
        p.count = per_slot - p.first;
      at += p.count;
    };
    if (pair < pair_end)
      take(pair, pair_end, N, pairs_a_stage, false);
    else if (row < row_end)
      take(row, row_end, H, rows_a_stage, true);
    else
      return false;
    return true;
  }
};

__device__ __forceinline__ F32x4 load_shared_f32x4(unsigned address) {
  F32x4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address));
  return v;
}

__device__ __forceinline__ void f16x2_to_f32(unsigned word, float& low, float& high) {
  asm("{\n.reg .b16 lo, hi;\n"
      "mov.b32 {lo, hi}, %2;\n"
      "cvt.f32.f16 %0, lo;\n"
      "cvt.f32.f16 %1, hi;\n}\n"
      : "=f"(low), "=f"(high)
      : "r"(word));
}

// Four e4m3 values (a word, lowest byte first) as floats, exactly.
__device__ __forceinline__ F32x4 e4m3x4_to_f32x4(unsigned word) {
  unsigned low, high;
  e4m3x4_to_f16x4(word, low, high);
  F32x4 v;
  f16x2_to_f32(low, v.x, v.y);
  f16x2_to_f32(high, v.z, v.w);
  return v;
}

__device__ __forceinline__ float dot4(unsigned weights, const F32x4& x, float sum) {
  const F32x4 w = e4m3x4_to_f32x4(weights);
  sum = fmaf(w.x, x.x, sum);
  sum = fmaf(w.y, x.y, sum);
  sum = fmaf(w.z, x.z, sum);
  return fmaf(w.w, x.w, sum);
}

// The sum of `value` over the `lanes` lanes of this lane's row (every lane gets it).
template <int LANES> __device__ __forceinline__ float row_sum(float value) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset /= 2)
    value += shfl_xor(value, offset);
  return value;
}

// GEMM1 on a stage of p.count gate rows, then their p.count up rows, against the token in shared
// memory (`token`: f32, quarter q of piece j at (q * H / 16 + j) * 16, so that a warp's loads are
// conflict-free).
template <int H, int N>
__device__ __forceinline__ void gemm1_stage(const LayerArgs& a, const Piece& p, unsigned stage,
                                            unsigned token, float scale, float inverse_a2) {
  using R = Rows<H>;
  const int lane = static_cast<int>(threadIdx.x) & 31, part = lane % R::lanes;
#pragma unroll 1
  for (int q0 = 0; q0 < p.count; q0 += R::rows_a_step) {
    const int q = q0 + lane / R::lanes;
    float gate = 0.0f, up = 0.0f;
    if (q < p.count) {
      const unsigned gate_row = stage + q * H, up_row = stage + (p.count + q) * H;
#pragma unroll
      for (int m = 0; m < R::per_lane; ++m) {
        const int j = part + R::lanes * m;
        const U32x4 g = load_shared_u32x4(gate_row + 16 * j);
        const U32x4 u = load_shared_u32x4(up_row + 16 * j);
        const unsigned words_g[4] = {g.x, g.y, g.z, g.w}, words_u[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const F32x4 x = load_shared_f32x4(token + (w * R::vectors + j) * 16);
          gate = dot4(words_g[w], x, gate);
          up = dot4(words_u[w], x, up);
        }
      }
    }
    gate = row_sum<R::lanes>(gate);
    up = row_sum<R::lanes>(up);
    if (part == 0 && q < p.count) {
      const float v = moe_silu(gate * scale) * (up * scale);
      a.intermediate[p.slot * N + p.first + q] =
          static_cast<unsigned char>(e4m3x2(v * inverse_a2, 0.0f) & 0xFF);
    }
  }
}

// The pieces of slot `slot`'s intermediate row this lane multiplies (Rows<N>), as floats, once
// every CTA has written the row: lane 0 polls the slot's count, then each lane acquires it.
template <int N>
__device__ __forceinline__ void load_intermediate(const LayerArgs& a, int slot, unsigned target,
                                                  float (&x)[16 * Rows<N>::per_lane]) {
  using R = Rows<N>;
  const unsigned* count = a.counts + 1 + slot;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  unsigned seen;
  if (lane == 0) {
#pragma unroll 1
    for (int polls = 0;; ++polls) {
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
      if (static_cast<int>(seen - target) >= 0)
        break;
      if (polls == 1 << 24) // seconds: a lost count, not a slow CTA; fail the launch
        __trap();
      __nanosleep(32);
    }
  }
  __syncwarp();
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
  const unsigned char* row = a.intermediate + slot * N;
#pragma unroll
  for (int m = 0; m < R::per_lane; ++m) {
    U32x4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(row + 16 * (lane % R::lanes + R::lanes * m))
                 : "memory");
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const F32x4 f = e4m3x4_to_f32x4(words[w]);
      x[16 * m + 4 * w] = f.x;
      x[16 * m + 4 * w + 1] = f.y;
      x[16 * m + 4 * w + 2] = f.z;
      x[16 * m + 4 * w + 3] = f.w;
    }
  }
}

// GEMM2 on a stage of p.count rows of w2 against slot p.slot's intermediate row (x).
template <int H, int N>
__device__ __forceinline__ void gemm2_stage(const LayerArgs& a, const Piece& p, unsigned stage,
                                            const float (&x)[16 * Rows<N>::per_lane]) {
  using R = Rows<N>;
  const int lane = static_cast<int>(threadIdx.x) & 31, part = lane % R::lanes;
  const float scale = a.a2 * moe_ldg(a.w2_scale + p.slot), weight = moe_ldg(a.router + p.slot);
#pragma unroll 1
  for (int q0 = 0; q0 < p.count; q0 += R::rows_a_step) {
    const int q = q0 + lane / R::lanes;
    float sum = 0.0f;
    if (q < p.count) {
#pragma unroll
      for (int m = 0; m < R::per_lane; ++m) {
        const U32x4 v = load_shared_u32x4(stage + q * N + 16 * (part + R::lanes * m));
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const F32x4 xs{x[16 * m + 4 * w], x[16 * m + 4 * w + 1], x[16 * m + 4 * w + 2],
                         x[16 * m + 4 * w + 3]};
          sum = dot4(words[w], xs, sum);
        }
      }
    }
    sum = row_sum<R::lanes>(sum);
    if (part == 0 && q < p.count)
      a.out[p.slot * H + p.first + q] =
          static_cast<unsigned short>(bf16x2(mul_rn(sum * scale, weight), 0.0f));
  }
}

// Dynamic shared memory: the ring, then the token as f32 (and 128 bytes of alignment slack).
template <int H, int STAGES> constexpr int layer_smem() {
  return STAGES * k_stage_bytes + H * 4 + 128;
}

template <int H, int N, int STAGES, int WARPS>
__global__ void __launch_bounds__(k_threads<WARPS>, 1)
    fused_layer(const __grid_constant__ LayerArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  __shared__ unsigned generation;
  const unsigned ring = (shared_address(smem) + 127) & ~127u;
  const unsigned token = ring + STAGES * k_stage_bytes;
  const unsigned full = shared_address(bars), empty = full + 8 * STAGES;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, 1);
    }
    mbarrier_init_fence();
    generation = atomicAdd(a.counts, 1u) / gridDim.x;
  }
  // The token, as f32 in the layout gemm1_stage reads.
  for (int j = static_cast<int>(threadIdx.x); j < H / 16; j += k_threads<WARPS>) {
    const U32x4 v = load_streaming(a.hidden + 16 * j);
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
    for (int w = 0; w < 4; ++w) {
      const F32x4 f = e4m3x4_to_f32x4(words[w]);
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(token + (w * H / 16 + j) * 16),
                   "f"(f.x), "f"(f.y), "f"(f.z), "f"(f.w)
                   : "memory");
    }
  }
  __syncthreads();
  Pieces<H, N> pieces;
  Piece p;
  if (warp == WARPS) { // producer
    if (lane != 0)
      return;
#pragma unroll 1
    for (int i = 0; pieces.next(p); ++i) {
      const int s = i % STAGES;
      const unsigned stage = ring + s * k_stage_bytes;
      mbarrier_wait(empty + 8 * s, ((i / STAGES) & 1) ^ 1);
      if (!p.gemm2) {
        const unsigned bytes = p.count * H;
        const unsigned char* gate = a.w13 + (static_cast<long long>(p.slot) * 2 * N + p.first) * H;
        mbarrier_arrive_expect_tx(full + 8 * s, 2 * bytes);
        bulk_load(stage, gate, bytes, full + 8 * s);
        bulk_load(stage + bytes, gate + static_cast<long long>(N) * H, bytes, full + 8 * s);
      } else {
        const unsigned bytes = p.count * N;
        mbarrier_arrive_expect_tx(full + 8 * s, bytes);
        bulk_load(stage, a.w2 + (static_cast<long long>(p.slot) * H + p.first) * N, bytes,
                  full + 8 * s);
      }
    }
    return;
  }
  const float inverse_a2 = div_rn(1.0f, a.a2);
  const unsigned target = (generation + 1) * N;
  float x[16 * Rows<N>::per_lane];
  int x_slot = -1;
#pragma unroll 1
  for (int i = 0; pieces.next(p); ++i) {
    if (i % WARPS != warp)
      continue;
    const int s = i % STAGES;
    if (p.gemm2 && p.slot != x_slot) {
      load_intermediate<N>(a, p.slot, target, x);
      x_slot = p.slot;
    }
    mbarrier_wait(full + 8 * s, (i / STAGES) & 1);
    const unsigned stage = ring + s * k_stage_bytes;
    if (!p.gemm2)
      gemm1_stage<H, N>(a, p, stage, token, a.a1 * moe_ldg(a.w13_scale + p.slot), inverse_a2);
    else
      gemm2_stage<H, N>(a, p, stage, x);
    __syncwarp();
    if (lane == 0) {
      mbarrier_arrive(empty + 8 * s);
      if (!p.gemm2) // release: the warp's intermediate bytes (ordered by __syncwarp) come first
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(a.counts + 1 + p.slot),
                     "r"(p.count)
                     : "memory");
    }
  }
}

// ---- host ----

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
