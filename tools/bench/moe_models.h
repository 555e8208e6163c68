// The shapes `specjit-bench moe` and `moe-routing` run: the three reference models (KERNELS.md,
// "Fused MoE") with the peer's figures, and scaled shapes on request.
#pragma once

#include "runtime/ops/fused_moe.h"

#include <cstdint>

namespace specjit::bench {

struct Model {
  const char* name;
  ops::MoeShape shape;
  double peer_us[7]; // vLLM Triton GEMM-only, FP8, at k_tokens
};

inline constexpr int64_t k_tokens[] = {1, 4, 16, 64, 256, 1024, 4096};
inline constexpr Model k_models[] = {
    {"qwen3-30b-a3b",
     {128, 8, 2048, 768, ops::MoeDType::fp8},
     {18.6, 41.5, 100.9, 152.2, 167.3, 211.6, 538.0}},
    {"mixtral-8x7b",
     {8, 2, 4096, 14336, ops::MoeDType::fp8},
     {101.4, 253.2, 327.7, 332.9, 385.6, 847.3, 2686.2}},
    {"deepseek-v3-tp8",
     {256, 8, 7168, 256, ops::MoeDType::fp8},
     {30.1, 53.9, 139.9, 302.6, 359.7, 464.1, 863.8}},
    // Scaled shapes, only on request (--models mix16,ds512,mix32,ds1k4): two and four times the
    // experts and the top-k, so the same tokens an expert over two and four times the weights.
    // Against the reference shapes they separate a launch's fixed cost from its streaming rate.
    {"mix16-x2", {16, 4, 4096, 14336, ops::MoeDType::fp8}, {0, 0, 0, 0, 0, 0, 0}},
    {"ds512-x2", {512, 16, 7168, 256, ops::MoeDType::fp8}, {0, 0, 0, 0, 0, 0, 0}},
    {"mix32-x4", {32, 8, 4096, 14336, ops::MoeDType::fp8}, {0, 0, 0, 0, 0, 0, 0}},
    {"ds1k4-x4", {1024, 32, 7168, 256, ops::MoeDType::fp8}, {0, 0, 0, 0, 0, 0, 0}},
};

} // namespace specjit::bench
