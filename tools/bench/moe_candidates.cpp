// The tile configurations `specjit-bench moe --tune` measures (moe_candidates.h).
#include "moe_candidates.h"

#include <algorithm>

namespace specjit::bench {

using namespace specjit::ops;

namespace {

GemmTile wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups, int split_k = 1,
                    int tiles = 1) {
  return GemmTile::wgmma_tile(block_n, stages, swap_ab, warpgroups, split_k, tiles);
}

} // namespace

std::vector<MoeTileConfig> moe_candidates(const MoeShape& s, int64_t tokens, const Arch& arch) {
  const int64_t per_expert = (tokens * s.top_k + s.experts - 1) / s.experts;
  std::vector<MoeTileConfig> list = {default_moe_config(s, tokens, arch)};
  auto add = [&](int bm, GemmTile g1, GemmTile g2) { list.push_back({bm, g1, g2}); };
  int bm = 8;
  while (bm < per_expert && bm < 128)
    bm *= 2;
  for (int m : {bm, bm / 2, bm * 2}) {
    if (m < 8 || m > 256)
      continue;
    add(m, wgmma_tile(128, 6, true, 1), wgmma_tile(64, 8, true, 1));
    add(m, wgmma_tile(128, 4, true, 1), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(128, 6, true, 2), wgmma_tile(64, 8, true, 2)); // K split in two
    add(m, wgmma_tile(128, 4, true, 2), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(128, 8, true, 2), wgmma_tile(64, 4, true, 1));
    add(m, wgmma_tile(128, 8, true, 1), wgmma_tile(64, 4, true, 2));
    add(m, wgmma_tile(64, 8, true, 1), wgmma_tile(64, 4, true, 1)); // GEMM1 packed: 2x the CTAs
    add(m, wgmma_tile(64, 8, true, 2), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(64, 6, true, 1), wgmma_tile(64, 6, true, 1));
  }
  if (per_expert <= 8) {
    // Split-K clusters: more CTAs streaming weights when few experts are hit.
    for (int split : {2, 4}) {
      add(bm, wgmma_tile(128, 6, true, 1, split), wgmma_tile(64, 8, true, 1, split));
      add(bm, wgmma_tile(128, 6, true, 1, split), wgmma_tile(64, 8, true, 1));
      add(bm, wgmma_tile(64, 8, true, 1, split), wgmma_tile(64, 8, true, 1, split));
      add(bm, wgmma_tile(128, 6, true, 2, split), wgmma_tile(64, 8, true, 2, split));
      add(bm, wgmma_tile(64, 8, true, 2, split), wgmma_tile(64, 6, true, 1, split));
    }
    add(bm, wgmma_tile(128, 6, true, 1, 8), wgmma_tile(64, 8, true, 1, 2));
    add(bm, wgmma_tile(64, 8, true, 1, 8), wgmma_tile(64, 8, true, 1, 4));
  }
  if (per_expert <= 32) {
    // Several tiles per CTA: longer pipelines for GEMMs whose K is a few stages.
    for (int tiles : {2, 4, 8})
      for (const GemmTile& g1 :
           {wgmma_tile(128, 6, true, 1, 4), wgmma_tile(64, 8, true, 2), wgmma_tile(128, 4, true, 1),
            wgmma_tile(128, 6, true, 1, 1, tiles)})
        add(bm, g1, wgmma_tile(64, 8, true, 1, 1, tiles));
  }
  for (int wg : {1, 2}) {
    add(64 * wg, wgmma_tile(256, 4, false, wg), wgmma_tile(256, 4, false, wg)); // bf16 only
    add(64 * wg, wgmma_tile(128, 5, false, wg), wgmma_tile(128, 5, false, wg));
    add(64 * wg, wgmma_tile(128, 4, false, wg), wgmma_tile(128, 6, false, wg));
    add(64 * wg, wgmma_tile(64, 6, false, wg), wgmma_tile(128, 4, false, wg));
  }
  if (per_expert >= 32) {
    // Normal orientation, several tiles per CTA: one setup and pipeline fill for several
    // weight tiles of a token block, the next tile streaming in under this one's epilogue.
    for (int wg : {1, 2}) {
      add(64 * wg, wgmma_tile(128, 4, false, wg, 1, 2), wgmma_tile(128, 6, false, wg, 1, 8));
      add(64 * wg, wgmma_tile(128, 4, false, wg, 1, 4), wgmma_tile(128, 6, false, wg, 1, 16));
      add(64 * wg, wgmma_tile(128, 4, false, wg, 1, 4), wgmma_tile(128, 4, false, wg, 1, 8));
      add(64 * wg, wgmma_tile(128, 4, false, wg), wgmma_tile(128, 6, false, wg, 1, 4));
      // Deeper GEMM1 pipelines (FP8 GEMM1 converts only its weights into shared memory).
      add(64 * wg, wgmma_tile(128, 6, false, wg, 1, 2), wgmma_tile(128, 6, false, wg, 1, 8));
      add(64 * wg, wgmma_tile(128, 6, false, wg, 1, 4), wgmma_tile(128, 6, false, wg, 1, 16));
    }
    // GEMM1 256 columns wide in one warpgroup (each token fragment feeds twice the MMA work;
    // 226 registers, no spills), with a 128-wide GEMM2 (a 256-wide FP8 GEMM2 spills).
    add(64, wgmma_tile(256, 4, false, 1), wgmma_tile(128, 6, false, 1, 1, 8));
    add(64, wgmma_tile(256, 4, false, 1, 1, 2), wgmma_tile(128, 6, false, 1, 1, 8));
    // ... and in two warpgroups, with registers moved from the producers (setmaxnreg); the
    // shared memory allows 3 stages.
    for (int tiles : {1, 2, 4})
      for (const GemmTile& g2 : {wgmma_tile(128, 4, false, 2), wgmma_tile(128, 6, false, 2, 1, 8),
                                 wgmma_tile(128, 4, false, 2, 1, 8)})
        add(128, wgmma_tile(256, 3, false, 2, 1, tiles), g2);
    // Swap-AB GEMM1 with a normal-orientation GEMM2 over 64-token blocks.
    add(64, wgmma_tile(128, 4, true, 1), wgmma_tile(128, 6, false, 1, 1, 8));
    add(64, wgmma_tile(128, 4, true, 1), wgmma_tile(128, 6, false, 1, 1, 16));
  }
  if (per_expert <= 16) {
    add(16, {64, 1, 4, 4}, {64, 1, 4, 4});
    add(16, {32, 1, 2, 6}, {32, 1, 2, 6});
  } else if (per_expert <= 128) {
    add(64, {128, 2, 2, 4}, {128, 2, 2, 4});
  } else {
    add(128, {128, 2, 4, 3}, {128, 2, 4, 3});
  }
  std::vector<MoeTileConfig> valid;
  for (const MoeTileConfig& c : list) {
    if (auto err = check_moe_config(s, c, arch)) {
      llvm::consumeError(std::move(err));
      continue;
    }
    if (std::find(valid.begin(), valid.end(), c) == valid.end())
      valid.push_back(c);
  }
  return valid;
}

const char* moe_family(const MoeTileConfig& c) {
  if (c.gemm1.kernel != MoeGemmKernel::wgmma || c.gemm2.kernel != MoeGemmKernel::wgmma)
    return "mma";
  if (c.gemm1.swap_ab && c.gemm2.swap_ab)
    return "swap_ab";
  if (!c.gemm1.swap_ab && !c.gemm2.swap_ab)
    return "normal";
  return "mixed";
}

} // namespace specjit::bench
