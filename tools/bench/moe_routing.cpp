// The benchmark's routings on the host (moe_routing.h).
#include "moe_routing.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace specjit::bench {

std::vector<float> router_logits(int64_t rows, int64_t experts, uint32_t seed) {
  std::vector<float> logits(rows * experts);
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& l : logits)
    l = normal(generator);
  return logits;
}

std::vector<int64_t> expert_slots(const std::vector<float>& logits, int64_t experts, int top_k,
                                  int64_t tokens) {
  std::vector<int64_t> slots(experts, 0);
  std::vector<int64_t> order(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int k = 0; k < top_k; ++k)
      ++slots[order[k]];
  }
  return slots;
}

RoutingBlocks routing_blocks(const std::vector<int64_t>& slots, int block_m) {
  const int64_t step = std::max(8, block_m / 4);
  auto round_up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
  RoutingBlocks r;
  for (int64_t n : slots) {
    if (n == 0)
      continue;
    ++r.distinct;
    for (int64_t used = n; used > 0; used -= block_m) {
      const int64_t in_block = std::min<int64_t>(used, block_m);
      ++r.blocks;
      r.swap_columns += round_up(in_block, step);
      r.normal_rows += round_up(in_block, 64);
    }
  }
  return r;
}

RoutingBlocks benchmark_routing(const ops::MoeShape& s, int64_t tokens, uint32_t seed,
                                int block_m) {
  return routing_blocks(
      expert_slots(router_logits(tokens, s.experts, seed), s.experts, s.top_k, tokens), block_m);
}

} // namespace specjit::bench
