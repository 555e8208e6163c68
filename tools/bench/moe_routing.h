// The benchmark's routings on the host, without a GPU: the router logits `specjit-bench moe`
// uploads, each token's top-k experts, and what the GEMMs make of them (token blocks, MMA
// widths). `specjit-bench moe-routing` prints them per routing seed, so that a GEMM time over
// many routings (moe --routings N) can be set against its blocks (tools/bench/moe_routing_fit.py).
#pragma once

#include "ops/moe/fused_moe.h"

#include <cstdint>
#include <vector>

namespace specjit::bench {

inline constexpr uint32_t k_routing_seed = 42; // the router logits every report's rows use

// `rows` x `experts` standard normal router logits from `seed` (std::mt19937, row-major): the
// values moe_harness's set_router_logits uploads. A seed's first rows are the same however many
// rows are drawn.
std::vector<float> router_logits(int64_t rows, int64_t experts, uint32_t seed);

// Slots per expert when the first `tokens` rows of `logits` each choose their top_k largest
// logits (the route kernel's softmax keeps their order).
std::vector<int64_t> expert_slots(const std::vector<float>& logits, int64_t experts, int top_k,
                                  int64_t tokens);

// What the GEMMs run for those slots in blocks of block_m (kernels_src/moe/wgmma_pipeline.cuh):
struct RoutingBlocks {
  int64_t distinct = 0;     // experts with at least one slot
  int64_t blocks = 0;       // token blocks (each expert's slots fill its blocks from the first)
  int64_t swap_columns = 0; // swap-AB MMA widths: each block's slots rounded up to the width
                            // step (block_m / 4, at least 8)
  int64_t normal_rows = 0;  // normal orientation: each block's slots rounded up to the 64 rows
                            // of a warpgroup
};
RoutingBlocks routing_blocks(const std::vector<int64_t>& slots, int block_m);

// The benchmark's routing `seed` of `tokens` tokens of shape `s` (k_routing_seed: the fixed one,
// whose logits cover moe's largest T, of which the first `tokens` rows route; 1..N: --routings')
// in blocks of block_m.
RoutingBlocks benchmark_routing(const ops::MoeShape& s, int64_t tokens, uint32_t seed, int block_m);

int run_moe_routing(int argc, char** argv);

} // namespace specjit::bench
