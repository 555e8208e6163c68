// The tile configurations `specjit-bench moe --tune` measures per token count, and the kernel
// family of a configuration (the crossover report's columns).
#pragma once

#include "runtime/ops/moe_config.h"

#include <vector>

namespace specjit::bench {

// Candidates for `tokens` on `arch` (sm_90a): the default rule's configuration; swap-AB tiles
// around the tokens per expert (with split-K clusters and several tiles per CTA while few
// tokens reach each expert); normal-orientation wgmma tiles at every T (the crossover is
// measured, not assumed); the mma.sync tiles of part 1. Only those check_moe_config accepts,
// without repeats.
std::vector<ops::MoeTileConfig> moe_candidates(const ops::MoeShape& s, int64_t tokens,
                                               const Arch& arch);

// "swap_ab", "normal", "mixed" (one GEMM of each) or "mma" (any mma.sync GEMM).
const char* moe_family(const ops::MoeTileConfig& c);

} // namespace specjit::bench
