// The one-launch T = 1 MoE decode layer of decode_fused.cu (see there): its arguments, its
// stages' work, and the kernel. A probe's kernel, built by nvcc only.
#pragma once

#include "probe_common.cuh"

#include "common/fp8.cuh"
#include "moe/moe_common.cuh"

namespace decode_fused {

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

// Four floats from shared memory in one 16-byte load.
__device__ __forceinline__ F32x4 load_shared_f32x4(unsigned address) {
  const U32x4 v = load_shared_u32x4(address);
  return {bits_to_float(v.x), bits_to_float(v.y), bits_to_float(v.z), bits_to_float(v.w)};
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

} // namespace decode_fused
