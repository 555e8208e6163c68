// The device side of `specjit-bench moe`: buffers for one shape (weights in k_weight_copies
// copies, so successive launches never find their experts in L2), the op's tensors over them,
// CUDA-graph timing, and parallel precompilation.
#pragma once

#include "bench_data.h"
#include "moe_routing.h"

#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/driver.h"
#include "runtime/engine.h"

#include <memory>
#include <utility>
#include <vector>

namespace specjit::bench {

inline constexpr int k_weight_copies = 3;

// What the buffers hold (written into the report).
inline constexpr const char* k_moe_data =
    "random: hidden N(0,1), w13 N(0,1/H), w2 N(0,1/I); FP8: e4m3 with one scale for the hidden "
    "states and one per expert (amax / 448), static a2 scale 16/448; bf16: the values rounded; "
    "router logits N(0,1); every row checked on a sample of tokens against the CPU reference";

// Device buffers of one shape; freed with the object.
struct Buffers {
  const runtime::Driver& drv;
  CUdeviceptr x = 0, logits = 0, out = 0, work = 0;
  CUdeviceptr scales = 0; // a1, a2, w13_scale [E], w2_scale [E] (f32)
  CUdeviceptr w13[k_weight_copies] = {}, w2[k_weight_copies] = {};
  ops::MoeWeightLayout weights = ops::MoeWeightLayout::row_major; // of w13 and w2 (pack_weights)
  RandomTensor host_x, host_w13, host_w2; // what every copy holds, for the reference check
  float a1_scale = 1, a2_scale = 1;
  ~Buffers() {
    for (CUdeviceptr p : {x, logits, scales, out, work})
      if (p)
        drv.cuMemFree(p);
    for (int c = 0; c < k_weight_copies; ++c)
      for (CUdeviceptr p : {w13[c], w2[c]})
        if (p)
          drv.cuMemFree(p);
  }
};

// Buffers for up to max_tokens tokens: random activations and weights (k_moe_data), random
// router logits (seed k_routing_seed).
struct Setup {
  std::unique_ptr<Buffers> buffers;
  int64_t max_tokens = 0;
};
Setup make_setup(const runtime::Driver& drv, const ops::MoeShape& s, int64_t max_tokens);

// Replaces every weight copy of `b` by its packed copy (moe_pack_weights).
void pack_weights(runtime::Engine& engine, const runtime::Driver& drv, const ops::MoeShape& s,
                  Buffers& b);

// The op's tensors over `b` for `tokens` tokens, weights from copy `copy`.
ops::FusedMoeTensors tensors(const Buffers& b, const ops::MoeShape& s, int64_t tokens,
                             int copy = 0);

// Median µs of one fused_moe call with `options`, from CUDA-graph replays of many calls that
// rotate over the weight copies. sustain_ms: untimed replays for that long first, so that the
// timed ones run at the clock the GPU holds under load (the H200 holds its power limit by the
// clock at FP8 prefill; docs/moe.md, "Power").
double time_us(runtime::Engine& engine, const runtime::Driver& drv, const ops::MoeShape& s,
               const Buffers& b, int64_t tokens, const ops::TunedMoeOptions& options,
               CUstream stream, double sustain_ms = 0);

// Median µs the host spends in one eager fused_moe call with `options` (its checks, the
// configuration, variant lookups, tensor maps and launches), each call made on an idle stream so
// that a full launch queue never holds it; the calls rotate over the weight copies, as a model's
// layers bring different weights.
double host_us(runtime::Engine& engine, const runtime::Driver& drv, const ops::MoeShape& s,
               const Buffers& b, int64_t tokens, const ops::TunedMoeOptions& options,
               CUstream stream);

// Replaces the first `rows` rows of the router logits with standard normal values from `seed`
// (the next layer call routes by them). Rows past `rows` keep theirs, so after
// set_router_logits(drv, b, s, setup.max_tokens, k_routing_seed) the logits are make_setup's.
void set_router_logits(const runtime::Driver& drv, const Buffers& b, const ops::MoeShape& s,
                       int64_t rows, uint32_t seed);

// Runs the whole layer once and compares a sample of its output rows with the CPU reference
// (FP8: the emulating one, bf16: fp32); exits with a message naming the point when they differ.
void check_layer(runtime::Engine& engine, const runtime::Driver& drv, const ops::MoeShape& s,
                 const Buffers& b, int64_t tokens, const ops::TunedMoeOptions& options,
                 CUstream stream);

// Distinct experts the last routing of `tokens` tokens chose (for the memory floor).
int64_t distinct_experts(const runtime::Driver& drv, const Buffers& b, const ops::MoeShape& s,
                         int64_t tokens);

// This GPU's memory rate as one cuMemcpyDtoD of 1 GiB moves it (bytes read + written per
// second, median of 5): the pool's H200s differ, so each report says what its machine reached.
double device_copy_bytes_per_s(const runtime::Driver& drv);

// The host data of one shape for `tokens` tokens (k_moe_data, bench_data's seeds 1-3): the
// activations, the weights, and the f32 scales a1, a2, w13_scale [E], w2_scale [E].
struct MoeHostData {
  RandomTensor x, w13, w2;
  std::vector<float> scales;
};
MoeHostData moe_host_data(const ops::MoeShape& s, int64_t tokens);

// Compiles (or loads) `requests` on all cores, dropping errors: the launches that follow report
// them.
void prepare_requests(runtime::Engine& engine,
                      const std::vector<runtime::VariantRequest>& requests);

// Compiles the variants of every (token count, configuration) on all cores, for weights in
// `layout` read as `reads` says (packed weights are read by variants of their own).
void precompile(runtime::Engine& engine, const ops::MoeShape& s,
                const std::vector<std::pair<int64_t, ops::MoeTileConfig>>& work,
                ops::MoeWeightLayout layout, ops::MoePackedReads reads);

} // namespace specjit::bench
