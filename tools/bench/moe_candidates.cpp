// The tiles `specjit-bench moe --tune` measures (moe_candidates.h).
#include "moe_candidates.h"

#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace specjit::bench {

using namespace specjit::ops;

namespace {

GemmTile wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups, int split_k = 1,
                    int tiles = 1) {
  return GemmTile::wgmma_tile(block_n, stages, swap_ab, warpgroups, split_k, tiles);
}

// Swap-AB tiles of GEMM `gemm` for per_expert tokens an expert.
std::vector<GemmTile> swap_tiles(int gemm, int64_t per_expert) {
  std::vector<GemmTile> list;
  // GEMM1: 128 weight rows (gate and up as two MMAs) or 64 (packed: twice the CTAs); GEMM2: 64.
  const std::vector<int> widths = gemm == 1 ? std::vector<int>{128, 64} : std::vector<int>{64};
  for (int bn : widths)
    for (int wg : {1, 2}) // K split across two warpgroups
      for (int stages : {4, 6, 8})
        list.push_back(wgmma_tile(bn, stages, true, wg));
  list.push_back(wgmma_tile(widths[0], 3, true, 1)); // more CTAs per SM
  // The persistent schedules' tiles (one warpgroup) at every depth and width: GEMM1's 64-row
  // tiles halve the work a CTA takes at a time, and so the last round's tail.
  auto persistent = [&](MoeSchedule schedule) {
    for (int bn : widths)
      for (int stages : {3, 4, 6, 8}) {
        GemmTile t = wgmma_tile(bn, stages, true, 1);
        t.schedule = schedule;
        list.push_back(t);
      }
  };
  // Dynamic: a resident grid taking whole tiles from a counter (no wave changes, one fill per
  // CTA, balance that follows each SM's memory service).
  persistent(MoeSchedule::dynamic);
  if (per_expert <= 32) {
    // Split-K clusters: more CTAs streaming weights when few experts are hit, shorter CTAs
    // against the last wave's tail.
    for (int split : {2, 4, 8})
      for (int bn : widths)
        for (int wg : {1, 2})
          list.push_back(wgmma_tile(bn, bn == 128 ? 6 : 8, true, wg, split));
    // Several tiles per CTA: longer pipelines for GEMMs whose K is a few stages.
    for (int tiles : {2, 4, 8})
      for (int stages : {4, 6, 8})
        list.push_back(wgmma_tile(widths[0], stages, true, 1, 1, tiles));
    // Stream-K: a resident grid shares every step (no wave tail, one fill per CTA); blocks of
    // up to 32 tokens (the rules refuse larger ones).
    persistent(MoeSchedule::stream_k);
  }
  return list;
}

// Normal-orientation tiles of GEMM `gemm` in `wg` warpgroups (64 token rows each).
std::vector<GemmTile> normal_tiles(int gemm, int wg) {
  std::vector<GemmTile> list;
  if (gemm == 1) {
    for (int stages : {4, 5, 6})
      for (int tiles : {1, 2, 4})
        list.push_back(wgmma_tile(128, stages, false, wg, 1, tiles));
    // 256 wide: each token fragment feeds twice the MMA work (two warpgroups: registers moved
    // from the producers, 3 stages fit).
    for (int stages : {3, 4})
      for (int tiles : {1, 2, 4})
        list.push_back(wgmma_tile(256, stages, false, wg, 1, tiles));
    list.push_back(wgmma_tile(64, 6, false, wg));
  } else {
    // Tile counts that divide 16 and 32 (Qwen3's and Mixtral's outputs) and 56 (DeepSeek's);
    // the others are refused by the rules and left out.
    for (int stages : {4, 6})
      for (int tiles : {1, 4, 7, 8, 14, 16})
        list.push_back(wgmma_tile(128, stages, false, wg, 1, tiles));
    // 256 wide: bf16, and FP8 over the whole K (promoted, its sums spill); 3 stages leave room
    // for the output staging.
    for (int stages : {3, 4})
      for (int tiles : {1, 2, 4})
        list.push_back(wgmma_tile(256, stages, false, wg, 1, tiles));
  }
  // The dynamic schedule: a resident grid taking the tiles one at a time in the grouped order
  // (no last round's tail, and the producers fill the next tile's stages during the epilogue).
  const size_t fixed = list.size();
  for (size_t i = 0; i < fixed; ++i)
    if (list[i].tiles == 1) {
      GemmTile t = list[i];
      t.schedule = MoeSchedule::dynamic;
      list.push_back(t);
    }
  return list;
}

// The mma.sync tiles of part 1 (both GEMMs alike) and their block size.
std::pair<int, std::vector<GemmTile>> mma_tiles(int64_t per_expert) {
  if (per_expert <= 16)
    return {16, {{64, 1, 4, 4}, {32, 1, 2, 6}}};
  if (per_expert <= 128)
    return {64, {{128, 2, 2, 4}}};
  return {128, {{128, 2, 4, 3}}};
}

} // namespace

std::vector<MoeCandidateBlock> moe_candidates(const MoeShape& s, int64_t tokens, const Arch& arch,
                                              MoeWeightLayout layout) {
  const int64_t per_expert = (tokens * s.top_k + s.experts - 1) / s.experts;
  std::vector<MoeCandidateBlock> blocks;
  auto add = [&](int block_m, int gemm, const GemmTile& t) {
    if (auto err = check_moe_gemm_tile(s, gemm, block_m, t, arch)) {
      llvm::consumeError(std::move(err));
      return;
    }
    if (layout == MoeWeightLayout::packed && !moe_tile_reads_packed(gemm, t))
      return;
    auto at = std::find_if(blocks.begin(), blocks.end(),
                           [&](const MoeCandidateBlock& b) { return b.block_m == block_m; });
    if (at == blocks.end())
      at = blocks.insert(blocks.end(), MoeCandidateBlock{block_m, {}, {}});
    std::vector<GemmTile>& list = gemm == 1 ? at->gemm1 : at->gemm2;
    if (std::find(list.begin(), list.end(), t) == list.end())
      list.push_back(t);
  };
  // Every FP8 GEMM1 tile that reads the e4m3 tokens also on e4m3 tensor cores over the whole K
  // (at decode it skips the weights' conversion: 1-4 % faster at T = 1 on the H200). At prefill
  // (256 tokens and more) also promoted once a stage (its rule refuses the tiles whose registers
  // would not hold it), and each of those also on the sorted e4m3 copy of the tokens where its
  // rule allows (the normal orientation, top_k <= 2). Every FP8 wgmma GEMM2 tile at prefill also
  // over the whole K (which lets the normal orientation's 256-wide tiles in).
  auto add_tile = [&](int block_m, int gemm, const GemmTile& t) {
    add(block_m, gemm, t);
    if (gemm == 2 && s.dtype == MoeDType::fp8 && tokens >= 256 &&
        t.kernel == MoeGemmKernel::wgmma) {
      GemmTile whole = t;
      whole.whole_k = true;
      add(block_m, gemm, whole);
    }
    if (gemm == 1 && s.dtype == MoeDType::fp8 && t.kernel == MoeGemmKernel::wgmma &&
        !t.f16_tokens) {
      const bool prefill = tokens >= 256;
      for (const bool whole_k : {false, true}) {
        if (!whole_k && !prefill)
          continue;
        GemmTile e4m3 = t;
        e4m3.e4m3 = true;
        e4m3.whole_k = whole_k;
        add(block_m, gemm, e4m3);
        e4m3.sorted_tokens = true; // refused unless normal with top_k <= 2
        if (prefill)
          add(block_m, gemm, e4m3);
      }
    }
  };
  const MoeTileConfig rule = default_moe_config(s, tokens, arch);
  add_tile(rule.block_m, 1, rule.gemm1);
  add_tile(rule.block_m, 2, rule.gemm2);
  int bm = 8; // the smallest power of two that holds an expert's tokens, at most 128
  while (bm < per_expert && bm < 128)
    bm *= 2;
  // Larger blocks hold all of an expert's tokens, each weight tile read (and FP8 GEMM1: converted)
  // once; their partly filled MMAs run narrower (moe_with_width).
  if (per_expert <= 64)
    for (int m : {bm, bm / 2, bm * 2, bm * 4})
      if (m >= 8 && m <= 64)
        for (int gemm : {1, 2})
          for (const GemmTile& t : swap_tiles(gemm, per_expert))
            add_tile(m, gemm, t);
  for (int wg : {1, 2})
    for (int gemm : {1, 2})
      for (const GemmTile& t : normal_tiles(gemm, wg))
        add_tile(64 * wg, gemm, t);
  // FP8 GEMM1 on the f16 copy of the tokens, two warpgroups (64 output columns each), from 16
  // tokens an expert: blocks that hold all of an expert's tokens, half of them, or (at most 128)
  // twice the average, which holds the experts routed more than average in one block; as deep a
  // pipeline as fits, one or several tiles per CTA (the rules refuse counts that do not divide),
  // or the dynamic schedule (tiles from a counter: no pipeline fill per CTA).
  if (s.dtype == MoeDType::fp8 && per_expert >= 16)
    for (int m : {bm, bm / 2, bm * 2})
      if (m >= 16 && m <= 128)
        for (int stages : {3, 4, 5, 6}) {
          for (int tiles : {1, 2, 3, 4, 6, 7}) {
            GemmTile t = wgmma_tile(256, stages, true, 2, 1, tiles);
            t.f16_tokens = true;
            add(m, 1, t);
          }
          GemmTile t = wgmma_tile(256, stages, true, 2);
          t.f16_tokens = true;
          t.schedule = MoeSchedule::dynamic;
          add(m, 1, t);
        }
  const auto [mma_m, mma_list] = mma_tiles(per_expert);
  for (int gemm : {1, 2})
    for (const GemmTile& t : mma_list)
      add(mma_m, gemm, t);
  // A block size takes part only with tiles for both GEMMs.
  std::erase_if(blocks,
                [](const MoeCandidateBlock& b) { return b.gemm1.empty() || b.gemm2.empty(); });
  return blocks;
}

std::vector<MoeTileConfig> moe_candidate_configs(const MoeCandidateBlock& block) {
  std::vector<MoeTileConfig> configs;
  const size_t n = std::max(block.gemm1.size(), block.gemm2.size());
  for (size_t i = 0; i < n; ++i)
    configs.push_back({block.block_m, block.gemm1[std::min(i, block.gemm1.size() - 1)],
                       block.gemm2[std::min(i, block.gemm2.size() - 1)]});
  return configs;
}

std::vector<GemmTile> moe_read_forms(const GemmTile& tile) {
  if (tile.kernel != MoeGemmKernel::wgmma)
    return {tile};
  std::vector<GemmTile> forms(2, tile);
  forms[0].packed_reads = MoePackedReads::bulk;
  forms[1].packed_reads = MoePackedReads::tensor_map;
  return forms;
}

std::vector<MoeTileConfig> moe_read_forms(const MoeTileConfig& config) {
  const std::vector<GemmTile> g1 = moe_read_forms(config.gemm1), g2 = moe_read_forms(config.gemm2);
  std::vector<MoeTileConfig> forms;
  for (size_t i = 0; i < 2; ++i)
    forms.push_back(
        {config.block_m, g1[std::min(i, g1.size() - 1)], g2[std::min(i, g2.size() - 1)]});
  return forms;
}

void moe_tune_pairs(int block_m, const std::vector<GemmTile>& gemm1_ranked,
                    const std::vector<GemmTile>& gemm2_ranked, std::vector<MoeTileConfig>& pairs) {
  auto add = [&](const GemmTile& g1, const GemmTile& g2) {
    const MoeTileConfig c{block_m, g1, g2};
    if (std::find(pairs.begin(), pairs.end(), c) == pairs.end())
      pairs.push_back(c);
  };
  for (size_t i = 0; i < std::min<size_t>(2, gemm1_ranked.size()); ++i)
    for (size_t j = 0; j < std::min<size_t>(2, gemm2_ranked.size()); ++j)
      add(gemm1_ranked[i], gemm2_ranked[j]);
  for (const std::string_view family : {"swap_ab", "normal", "mma"}) {
    auto of = [&](const GemmTile& t) { return moe_tile_family(t) == family; };
    auto g1 = std::find_if(gemm1_ranked.begin(), gemm1_ranked.end(), of);
    auto g2 = std::find_if(gemm2_ranked.begin(), gemm2_ranked.end(), of);
    if (g1 != gemm1_ranked.end() && g2 != gemm2_ranked.end())
      add(*g1, *g2);
  }
  // Each GEMM's best tile of each schedule with the other's best, and with its best of the same
  // schedule: the tiles alone are timed on the fixed routing, whose CTA count may fill the
  // waves of a fixed grid where most routings do not (Mixtral T = 4: 7 experts against 5.3 on
  // average); the pairs are judged over --tune-routings.
  if (gemm1_ranked.empty() || gemm2_ranked.empty())
    return;
  for (const MoeSchedule schedule :
       {MoeSchedule::fixed, MoeSchedule::dynamic, MoeSchedule::stream_k}) {
    auto of = [&](const GemmTile& t) { return t.schedule == schedule; };
    auto g1 = std::find_if(gemm1_ranked.begin(), gemm1_ranked.end(), of);
    auto g2 = std::find_if(gemm2_ranked.begin(), gemm2_ranked.end(), of);
    if (g1 != gemm1_ranked.end())
      add(*g1, gemm2_ranked[0]);
    if (g2 != gemm2_ranked.end())
      add(gemm1_ranked[0], *g2);
    if (g1 != gemm1_ranked.end() && g2 != gemm2_ranked.end())
      add(*g1, *g2);
  }
}

llvm::Expected<bool> moe_gemm_compiles_clean(runtime::Engine& engine, const MoeShape& s,
                                             const MoeTileConfig& config, int gemm, int64_t tokens,
                                             MoeWeightLayout layout, MoePackedReads reads) {
  TunedMoeOptions options;
  options.config = config;
  options.packed_reads = reads;
  auto variants = prepare_fused_moe(engine, s, options, {tokens}, layout);
  if (!variants)
    return variants.takeError();
  // The GEMM kernels are moe_gemm{1,2}_* (mma.sync) and moe_wgmma{1,2}_*.
  const std::string mma = fmt::format("moe_gemm{}_", gemm),
                    wgmma = fmt::format("moe_wgmma{}_", gemm);
  for (const runtime::Variant* v : *variants) {
    const llvm::StringRef name(v->kernel_name);
    if (!name.startswith(mma) && !name.startswith(wgmma))
      continue;
    const bool serialized =
        std::any_of(v->warnings.begin(), v->warnings.end(),
                    [](const std::string& w) { return w.find("C75") != std::string::npos; });
    return v->spill_bytes == 0 && !serialized;
  }
  return make_error(Errc::invalid_argument, "fused_moe: no GEMM{} kernel among the variants of {}",
                    gemm, config.describe());
}

void configure_for_tuning(Config& config) {
  if (config.storm_threshold.source == SettingSource::default_value)
    config.storm_threshold.set(k_tune_storm_threshold, SettingSource::api);
}

const char* moe_tile_family(const GemmTile& t) {
  if (t.kernel != MoeGemmKernel::wgmma)
    return "mma";
  return t.swap_ab ? "swap_ab" : "normal";
}

const char* moe_family(const MoeTileConfig& c) {
  const std::string_view g1 = moe_tile_family(c.gemm1), g2 = moe_tile_family(c.gemm2);
  if (g1 == "mma" || g2 == "mma")
    return "mma";
  return g1 == g2 ? moe_tile_family(c.gemm1) : "mixed";
}

} // namespace specjit::bench
