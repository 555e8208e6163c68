// The tile configurations the fused MoE GPU cases force (fused_moe_support.h).
#include "gpu/fused_moe_support.h"

#include <algorithm>
#include <iterator>

namespace specjit::test::moe_gpu {

using namespace specjit::ops;

std::optional<MoeTileConfig> forced_config(const MoeShape& s, int64_t tokens, Forced forced) {
  if (forced == Forced::none)
    return std::nullopt;
  if (forced == Forced::mma)
    return default_moe_config(s, tokens, Arch{9, 0, false});
  if (forced == Forced::wgmma_e4m3_sorted) {
    if (s.dtype != MoeDType::fp8 || s.top_k > 2)
      return std::nullopt; // the sorted e4m3 copy is for top-2 FP8 models
    // GEMM1 on the sorted e4m3 copy of the tokens (normal orientation): 128 wide in one
    // warpgroup over blocks of 64 (partly filled up to T = 64), 256 wide in two with two tiles
    // a CTA at T = 1024; promoted at T = 3, 64 and 1024, over the whole K at T = 1, 16 and 200.
    // At T = 200 the dynamic schedule, 256 wide in two warpgroups over blocks of 128 (partly
    // filled: the second warpgroup's rows all padding in most blocks).
    const bool wide = tokens >= 1024, dynamic = tokens == 200;
    MoeTileConfig c;
    c.block_m = wide || dynamic ? 128 : 64;
    c.gemm1 = wide      ? GemmTile::wgmma_tile(256, 4, false, 2, 1, 2)
              : dynamic ? GemmTile::wgmma_tile(256, 4, false, 2)
                        : GemmTile::wgmma_tile(128, 4, false, 1);
    c.gemm2 = GemmTile::wgmma_tile(128, 4, false, wide || dynamic ? 2 : 1);
    if (dynamic)
      c.gemm1.schedule = c.gemm2.schedule = MoeSchedule::dynamic;
    c.gemm1.e4m3 = c.gemm1.sorted_tokens = true;
    c.gemm1.whole_k = tokens == 1 || tokens == 16 || tokens == 200;
    return c;
  }
  const bool e4m3 = forced == Forced::wgmma_e4m3 || forced == Forced::wgmma_e4m3w;
  if ((forced == Forced::wgmma_f16_tokens || e4m3) && s.dtype != MoeDType::fp8)
    return std::nullopt; // an FP8 GEMM1 tile: bf16 runs the default rule
  if (e4m3) {
    // GEMM1 on e4m3 tensor cores in every orientation and schedule its rule allows (promoted
    // once a stage, or over the whole K with wgmma_e4m3w): swap-AB
    // packed (T = 1), two warpgroups splitting K (3), split-K clusters (16), dynamic (64),
    // stream-K (200), normal 128 and 256 wide in two warpgroups (1024; 256: registers moved
    // from the producers), partly filled blocks at the narrower widths. With wgmma_e4m3w GEMM2
    // also runs over the whole K at T = 3, 64, 200 and 1024 (there 256 wide), promoted at 1 and
    // 16.
    const bool gemm2_whole_k = forced == Forced::wgmma_e4m3w && tokens != 1 && tokens != 16;
    MoeTileConfig c;
    c.gemm2 = GemmTile::wgmma_tile(64, 4, true, 1);
    switch (tokens) {
    case 1:
      c.block_m = 8;
      c.gemm1 = GemmTile::wgmma_tile(64, 4, true, 1);
      break;
    case 3:
      c.block_m = 8;
      c.gemm1 = GemmTile::wgmma_tile(128, 6, true, 2);
      break;
    case 16:
      c.block_m = 16;
      c.gemm1 = GemmTile::wgmma_tile(128, 6, true, 1, 2);
      break;
    case 64:
      c.block_m = 64;
      c.gemm1 = GemmTile::wgmma_tile(128, 4, true, 1);
      c.gemm1.schedule = MoeSchedule::dynamic;
      break;
    case 200:
      c.block_m = 32;
      c.gemm1 = GemmTile::wgmma_tile(128, 4, true, 1);
      c.gemm1.schedule = MoeSchedule::stream_k;
      c.gemm2.schedule = MoeSchedule::stream_k;
      break;
    default:
      c.block_m = 128;
      c.gemm1 = GemmTile::wgmma_tile(s.experts == 256 ? 128 : 256, 4, false, 2);
      c.gemm2 = GemmTile::wgmma_tile(gemm2_whole_k ? 256 : 128, 4, false, 2);
      break;
    }
    c.gemm1.e4m3 = true;
    c.gemm1.whole_k = forced == Forced::wgmma_e4m3w;
    c.gemm2.whole_k = gemm2_whole_k;
    return c;
  }
  if (forced == Forced::wgmma_dynamic_normal) {
    // The dynamic schedule in the normal orientation (tiles from a counter in the grouped
    // order): one warpgroup (blocks of 64) at T = 1, 16 and 200, two (blocks of 128, 256-wide
    // GEMM1 with registers moved from the gathering producers) at T = 3, 64 and 1024; FP8 GEMM1
    // exact at T = 1 and 3, promoted at 64, over the whole K at 16, 200 and 1024; GEMM2 dynamic
    // but at T = 200 (a fixed GEMM2 taking the dynamic GEMM1's blocks by the hand-off), over the
    // whole K at 16 and 1024 (256 wide).
    const bool fp8 = s.dtype == MoeDType::fp8;
    const bool two = tokens == 3 || tokens == 64 || tokens == 1024;
    MoeTileConfig c;
    c.block_m = two ? 128 : 64;
    c.gemm1 =
        GemmTile::wgmma_tile(two ? 256 : 128, two && tokens != 1024 ? 3 : 4, false, two ? 2 : 1);
    const bool wide2 = fp8 && tokens == 1024;
    c.gemm2 = GemmTile::wgmma_tile(wide2 ? 256 : 128, wide2 ? 3 : 4, false, two ? 2 : 1);
    c.gemm1.schedule = MoeSchedule::dynamic;
    if (tokens != 200)
      c.gemm2.schedule = MoeSchedule::dynamic;
    if (fp8 && tokens != 1 && tokens != 3) {
      c.gemm1.e4m3 = true;
      c.gemm1.whole_k = tokens != 64;
      c.gemm2.whole_k = tokens == 16 || tokens == 1024;
    }
    return c;
  }
  if (forced == Forced::wgmma_f16_tokens) {
    MoeTileConfig c;
    // GEMM1 reading the f16 copy of the tokens: blocks of 8 to 128 tokens (partly filled blocks
    // at the narrower widths), one warpgroup or two (64 output columns each), one or two tiles.
    c.block_m = tokens <= 3 ? 8 : tokens == 16 ? 16 : tokens == 64 ? 32 : tokens == 200 ? 64 : 128;
    const int warpgroups = tokens == 1 || tokens == 16 ? 1 : 2;
    // Two tiles per CTA at T = 200 (Qwen3: 6 tiles of 128 columns, DeepSeek: 2).
    c.gemm1 = GemmTile::wgmma_tile(128 * warpgroups, c.block_m == 128 ? 3 : 4, true, warpgroups, 1,
                                   tokens == 200 ? 2 : 1);
    c.gemm1.f16_tokens = true;
    // The dynamic schedule at T = 3, 16 and 1024: one warpgroup and two, blocks of 8, 16, 128.
    if (tokens == 3 || tokens == 16 || tokens == 1024)
      c.gemm1.schedule = MoeSchedule::dynamic;
    c.gemm2 = GemmTile::wgmma_tile(64, 4, true, 1);
    return c;
  }
  MoeTileConfig c;
  c.gemm1.kernel = c.gemm2.kernel = MoeGemmKernel::wgmma;
  c.gemm1.stages = 4;
  c.gemm2.stages = 5;
  if (forced == Forced::wgmma_split) {
    // Split-K clusters: 4 CTAs (GEMM1) and 2 (GEMM2) per tile, with one or two warpgroups each,
    // packed or two-MMA GEMM1 tiles, N = 8 or 32 tokens; at T = 16 and 1024 several tiles per CTA.
    c.gemm1.swap_ab = c.gemm2.swap_ab = true;
    c.block_m = tokens <= 16 ? 8 : 32;
    c.gemm1.warpgroups = tokens == 3 || tokens == 64 ? 2 : 1;
    c.gemm1.block_n = tokens <= 3 || tokens == 200 ? 64 : 128;
    c.gemm1.split_k = tokens == 16 ? 2 : 4;
    c.gemm1.stages = 6;
    c.gemm2.block_n = 64;
    c.gemm2.split_k = 2;
    c.gemm2.stages = 8;
    if (tokens == 16 || tokens == 1024) { // several tiles per CTA instead
      c.gemm1 = GemmTile::wgmma_tile(128, 6, true, 1, 1, tokens == 16 ? 2 : 4);
      c.gemm2 = GemmTile::wgmma_tile(64, 8, true, 1, 1, tokens == 16 ? 8 : 4);
    }
  } else if (forced == Forced::wgmma_stream_k) {
    // Stream-K: a resident grid shares all steps. At T = 1-3 most tiles are split between many
    // CTAs (DeepSeek GEMM1: 56 stages a tile, a few stages a CTA); blocks of 8, 16 and 32 tokens,
    // two-MMA GEMM1.
    c.block_m = tokens <= 16 ? 8 : tokens == 200 ? 16 : 32;
    c.gemm1 = GemmTile::wgmma_tile(128, tokens == 3 ? 6 : 4, true, 1);
    c.gemm2 = GemmTile::wgmma_tile(64, tokens == 64 ? 4 : 6, true, 1);
    c.gemm1.schedule = c.gemm2.schedule = MoeSchedule::stream_k;
  } else if (forced == Forced::wgmma_dynamic) {
    // Whole tiles from a counter: blocks of 8, 16, 32 and (T = 200) 64 tokens, two-MMA GEMM1.
    c.block_m = tokens <= 16 ? 8 : tokens == 200 ? 64 : tokens == 64 ? 16 : 32;
    c.gemm1 = GemmTile::wgmma_tile(128, tokens == 3 ? 6 : 4, true, 1);
    c.gemm2 = GemmTile::wgmma_tile(64, tokens == 64 ? 4 : 6, true, 1);
    c.gemm1.schedule = c.gemm2.schedule = MoeSchedule::dynamic;
  } else if (forced == Forced::wgmma_swap) {
    c.gemm1.swap_ab = c.gemm2.swap_ab = true;
    // Token tiles of 8, 32 and (T = 200) 64 rows: partly filled blocks run their MMAs at the
    // narrower widths of moe_with_width (multiples of 8 and of 16), full ones at the tile's.
    c.block_m = tokens <= 16 ? 8 : tokens == 200 ? 64 : 32;
    // K split across two warpgroups for a few token counts, one warpgroup for the others.
    c.gemm1.warpgroups = c.gemm2.warpgroups = tokens <= 16 ? 2 : 1;
    c.gemm1.block_n = tokens <= 3 || tokens == 64 ? 64 : 128; // packed gate/up, or two MMAs
    c.gemm2.block_n = 64;
    if (c.gemm2.warpgroups == 2) // each warpgroup keeps its own stages: an even number
      c.gemm2.stages = 6;
  } else {
    c.gemm1.warpgroups = c.gemm2.warpgroups = tokens <= 64 ? 1 : 2;
    c.block_m = 64 * c.gemm1.warpgroups;
    c.gemm1.block_n = s.dtype == MoeDType::fp8 ? 128 : 256;
    c.gemm2.block_n = 128;
    if (tokens == 16 || tokens == 200 || tokens == 1024) { // several tiles per CTA
      c.gemm1.tiles = s.dtype == MoeDType::fp8 ? 4 : 2;    // Qwen3 and DeepSeek: whole groups
      c.gemm2.tiles = 8;
    }
    if (s.dtype == MoeDType::fp8 && (tokens == 1 || tokens == 64)) { // 256-wide FP8 GEMM1
      c.gemm1.block_n = 256;
      c.gemm1.tiles = tokens == 64 ? 2 : 1;
    }
    if (s.dtype == MoeDType::fp8 && (tokens == 3 || tokens == 1024)) {
      // 256-wide FP8 GEMM1 in two warpgroups (registers moved from the producers: setmaxnreg).
      c.block_m = 128;
      c.gemm1 = GemmTile::wgmma_tile(256, 3, false, 2, 1, tokens == 1024 ? 2 : 1);
      c.gemm2.warpgroups = 2;
    }
  }
  return c;
}

// The forced families of the next case, by the names SPECJIT_FORCED_ONLY uses.
const std::pair<Forced, const char*> k_forced_families[k_forced_family_count] = {
    {Forced::wgmma_swap, "swap"},
    {Forced::wgmma_split, "split"},
    {Forced::wgmma_stream_k, "stream_k"},
    {Forced::wgmma_dynamic, "dynamic"},
    {Forced::wgmma_dynamic_normal, "dynamic_normal"},
    {Forced::wgmma_normal, "normal"},
    {Forced::wgmma_f16_tokens, "f16_tokens"},
    {Forced::mma, "mma"}};

// SPECJIT_FORCED_ONLY narrows the next case for a quick check of one kernel change on a GPU:
// a comma-separated list of families (k_forced_families) and dtypes (fp8, bf16), e.g.
// "swap,split,fp8". Unset (as in CI and the logged runs), everything runs.
bool forced_selected(const char* family, MoeDType dtype) {
  const std::optional<std::string> only = env_list("SPECJIT_FORCED_ONLY");
  if (!only)
    return true;
  auto in = [&](llvm::StringRef name) { return listed(*only, name); };
  const bool any_family = std::none_of(std::begin(k_forced_families), std::end(k_forced_families),
                                       [&](const auto& f) { return in(f.second); });
  const bool any_dtype = !in(moe_dtype_name(MoeDType::fp8)) && !in(moe_dtype_name(MoeDType::bf16));
  return (any_family || in(family)) && (any_dtype || in(moe_dtype_name(dtype)));
}

} // namespace specjit::test::moe_gpu
