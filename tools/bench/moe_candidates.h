// What `specjit-bench moe --tune` measures per token count, and the kernel family of a tile or
// configuration (the crossover report's columns).
//
// The search is factorized: given the token-block size block_m (it fixes the grouping both
// GEMMs read), GEMM1's tile and GEMM2's tile are independent, so the tuner times each GEMM's
// candidates alone and then only the best pairs together (GEMM2's programmatic launch overlaps
// the two, so the pair's time is measured, not summed). That searches the product of the two
// lists at the cost of their sum.
#pragma once

#include "ops/moe/config.h"
#include "ops/moe/fused_moe.h"
#include "runtime/engine.h"

#include <vector>

namespace specjit::bench {

// One token-block size and the tiles to try for each GEMM over it (each valid by
// check_moe_gemm_tile, without repeats, neither list empty).
struct MoeCandidateBlock {
  int block_m = 0;
  std::vector<ops::GemmTile> gemm1, gemm2;
};

// Candidates for `tokens` on `arch` (sm_90a): swap-AB tiles for block sizes from half to four
// times the tokens per expert (up to 64; with split-K clusters and several tiles per CTA while
// few tokens reach each expert), normal-orientation tiles over blocks of 64 and 128 at every T
// (the crossover is measured, not assumed), the mma.sync tiles of part 1, and the default
// rule's tiles. On packed weights (`layout`), only the tiles that read them
// (ops::moe_tile_reads_packed: no mma.sync tiles).
std::vector<MoeCandidateBlock>
moe_candidates(const ops::MoeShape& s, int64_t tokens, const Arch& arch,
               ops::MoeWeightLayout layout = ops::MoeWeightLayout::row_major);

// Configurations over `block` that together use every one of its tiles (what to precompile).
std::vector<ops::MoeTileConfig> moe_candidate_configs(const MoeCandidateBlock& block);

// The forms of `tile` a tune on packed weights times: a wgmma tile reading them by bulk copies
// and through the map (GemmTile::packed_reads, the table's "reads"); an mma.sync tile as it is.
std::vector<ops::GemmTile> moe_read_forms(const ops::GemmTile& tile);
// `config` with both GEMMs in each read form: the bulk-copy form, then the map form (what to
// precompile for such a tune; an mma.sync tile stays as it is in both).
std::vector<ops::MoeTileConfig> moe_read_forms(const ops::MoeTileConfig& config);

// The pairs over block size `block_m` worth timing together, given each GEMM's tiles timed alone
// and ranked fastest first: the two best of GEMM1 crossed with the two best of GEMM2, the best
// pair of each kernel family, and each GEMM's best tile of each schedule (fixed, dynamic,
// stream-K) with the other GEMM's best and with its best of that schedule. Appended to `pairs`,
// without repeats. (Crossing the best 8
// of each GEMM with the best 2 of the other instead measured within 1.5 % at T = 1-256 on the
// H200.)
void moe_tune_pairs(int block_m, const std::vector<ops::GemmTile>& gemm1_ranked,
                    const std::vector<ops::GemmTile>& gemm2_ranked,
                    std::vector<ops::MoeTileConfig>& pairs);

// Whether GEMM `gemm` (1 or 2) of `config` at `tokens` compiles as a hot variant must: no
// spills and no wgmma diagnostic (ptxas' C75xx, e.g. serialized wgmmas), by the engine's report
// of the variant (compiled now, or found in its cache), for weights in `layout` read as `reads`
// says (packed weights are read by variants of their own). The tuner times only such tiles, so a
// table it writes holds only such variants (CI checks the table's again).
llvm::Expected<bool> moe_gemm_compiles_clean(runtime::Engine& engine, const ops::MoeShape& s,
                                             const ops::MoeTileConfig& config, int gemm,
                                             int64_t tokens, ops::MoeWeightLayout layout,
                                             ops::MoePackedReads reads);

// The tuner's engine settings: it compiles many values of each GEMM's template parameters on
// purpose (every candidate's tiles, stages, ...), which the engine's recompile-storm warning
// (more than SPECJIT_STORM_THRESHOLD distinct values of a parameter under policy exact, default
// 8) would report as a storm. Unless the user set the threshold, raise it to
// k_tune_storm_threshold for the tune.
inline constexpr int64_t k_tune_storm_threshold = 4096;
void configure_for_tuning(Config& config);

// "swap_ab", "normal" or "mma".
const char* moe_tile_family(const ops::GemmTile& t);
// "swap_ab", "normal", "mixed" (one GEMM of each) or "mma" (any mma.sync GEMM).
const char* moe_family(const ops::MoeTileConfig& c);

} // namespace specjit::bench
