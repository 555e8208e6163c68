// The shapes `specjit-bench moe` and `moe-routing` run: the three reference models (KERNELS.md,
// "Fused MoE") with the peer's figures, and scaled shapes on request. The peer's figures come in
// two arrays, each to be set against the same routing's time: the fixed routing (seed 42) and the
// mean over 20 fresh routings.
#pragma once

#include "ops/moe/fused_moe.h"

#include <cstdint>
#include <optional>

namespace specjit::bench {

// How the peer's figures were measured (written into every report and the table's header).
inline constexpr const char* k_peer_date = "2026-12-01";
inline constexpr const char* k_peer_method =
    "vLLM Triton fused_moe_kernel, GEMM1+GEMM2 us, FP8 per-tensor, CUDA-graph replay, median, "
    "random data, best of vLLM's default and every H200 tuned configuration, NVIDIA H200";
// The device the peer's figures were measured on, as the driver names it: on any other the bench
// prints no ratio to them (a peer figure compares only on its own device).
inline constexpr const char* k_peer_device = "NVIDIA H200";
inline constexpr const char* k_peer_fixed_routing = "seed 42 (the fixed routing of the rows)";
inline constexpr int k_peer_mean_routings = 20;

// The peer's GEMM µs at k_tokens (0: none): on the fixed routing, and the mean over 20 routings.
struct PeerFigures {
  double fixed_us[7];
  double mean_us[7];
};

struct Model {
  const char* name;
  ops::MoeShape shape;
  PeerFigures peer;
};

// Peer time / own time, each ratio on one routing: fixed with fixed, mean with mean.
struct PeerRatios {
  std::optional<double> fixed, mean;
};
inline PeerRatios peer_ratios(const PeerFigures& peer, size_t index, double fixed_us,
                              std::optional<double> mean_us) {
  PeerRatios r;
  if (peer.fixed_us[index] > 0 && fixed_us > 0)
    r.fixed = peer.fixed_us[index] / fixed_us;
  if (peer.mean_us[index] > 0 && mean_us && *mean_us > 0)
    r.mean = peer.mean_us[index] / *mean_us;
  return r;
}

inline constexpr int64_t k_tokens[] = {1, 4, 16, 64, 256, 1024, 4096};
inline constexpr Model k_models[] = {
    {"qwen3-30b-a3b",
     {128, 8, 2048, 768, ops::MoeDType::fp8},
     {{18.5, 42.1, 103.4, 151.1, 166.5, 201.0, 478.9},
      {18.7, 41.4, 100.1, 150.8, 166.3, 205.2, 473.1}}},
    {"mixtral-8x7b",
     {8, 2, 4096, 14336, ops::MoeDType::fp8},
     {{102.4, 291.1, 330.4, 334.3, 366.2, 717.2, 2617.4},
      {101.9, 225.9, 330.4, 334.0, 378.4, 828.0, 2660.3}}},
    {"deepseek-v3-tp8",
     {256, 8, 7168, 256, ops::MoeDType::fp8},
     {{30.4, 52.6, 149.1, 304.5, 358.1, 464.8, 820.7},
      {30.0, 52.4, 143.4, 305.7, 357.3, 464.8, 847.2}}},
    // Scaled shapes, only on request (--models mix16,ds512,mix32,ds1k4): two and four times the
    // experts and the top-k, so the same tokens an expert over two and four times the weights.
    // Against the reference shapes they separate a launch's fixed cost from its streaming rate.
    {"mix16-x2", {16, 4, 4096, 14336, ops::MoeDType::fp8}, {}},
    {"ds512-x2", {512, 16, 7168, 256, ops::MoeDType::fp8}, {}},
    {"mix32-x4", {32, 8, 4096, 14336, ops::MoeDType::fp8}, {}},
    {"ds1k4-x4", {1024, 32, 7168, 256, ops::MoeDType::fp8}, {}},
};

} // namespace specjit::bench
