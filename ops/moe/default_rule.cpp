// The default tile rule of the fused MoE layer (ops/moe/config.h: default_moe_config):
// the configuration a shape gets on a target where no table entry serves it.
#include "ops/moe/config.h"
#include "ops/moe/detail.h"

#include <algorithm>

namespace specjit::ops {

const std::vector<int64_t>& default_moe_buckets() {
  static const std::vector<int64_t> buckets = {1, 4, 16, 64, 256, 1024, 4096};
  return buckets;
}

namespace {

// Shrinks block_n (and then warps_n) until the tile divides `rows` of the weight.
GemmTile fit(GemmTile tile, int64_t out_columns, bool gated) {
  auto divides = [&](const GemmTile& t) {
    const int64_t per_tile = gated ? t.block_n / 2 : t.block_n;
    return t.block_n % (16 * t.warps_n) == 0 && per_tile % 8 == 0 && out_columns % per_tile == 0;
  };
  while (!divides(tile) && tile.block_n > 16) {
    tile.block_n /= 2;
    while (tile.block_n % (16 * tile.warps_n) != 0 && tile.warps_n > 1)
      tile.warps_n /= 2;
  }
  return tile;
}

MoeTileConfig mma_default(const MoeShape& shape, int64_t per_expert, int64_t experts_hit,
                          int64_t sms) {
  MoeTileConfig c;
  if (per_expert <= 16) {
    // Weight streaming: 16-row tiles; narrow enough that the experts hit fill the GPU twice.
    c.block_m = 16;
    c.gemm1 = {64, 1, 4, 4};
    c.gemm2 = {64, 1, 4, 4};
    if (experts_hit * (2 * shape.intermediate / 64) < 2 * sms)
      c.gemm1 = {32, 1, 2, 6};
    if (experts_hit * (shape.hidden / 64) < 2 * sms)
      c.gemm2 = {32, 1, 2, 6};
  } else if (per_expert <= 48) {
    c.block_m = 32;
    c.gemm1 = {128, 2, 2, 4};
    c.gemm2 = {128, 2, 2, 4};
  } else if (per_expert <= 128) {
    c.block_m = 64;
    c.gemm1 = {128, 2, 2, 4};
    c.gemm2 = {128, 2, 2, 4};
  } else {
    c.block_m = 128;
    c.gemm1 = {128, 2, 4, 3};
    c.gemm2 = {128, 2, 4, 3};
  }
  c.gemm1 = fit(c.gemm1, shape.intermediate, true);
  c.gemm2 = fit(c.gemm2, shape.hidden, false);
  return c;
}

// The widest normal-orientation weight tile that divides the outputs: 256 rows, 128, 64.
int wgmma_block_n(int64_t out_columns, bool gated) {
  for (int block_n : {256, 128, 64})
    if (out_columns % (gated ? block_n / 2 : block_n) == 0)
      return block_n;
  return 64;
}

// GEMM2's K (the intermediate) in pipeline stages of 128 bytes.
int64_t gemm2_k_stages(const MoeShape& shape) {
  return shape.intermediate * moe_detail::element_bytes(shape.dtype) / 128;
}

// FP8 GEMM2 in the normal orientation over a short K (the intermediate: DeepSeek's 256 bytes is
// 2 stages of 128, Qwen3's 768 6): several weight tiles a CTA, the fewest that give each CTA at
// least 24 stages to stream, so that its setup, fill and drain are paid once for them (the tuned
// tiles: DeepSeek 14 tiles of 128, Qwen3 T = 4096 4 of 256).
int short_k_tiles(const MoeShape& shape, int block_n) {
  const int64_t stages = gemm2_k_stages(shape);
  const int64_t tiles = shape.hidden / block_n;
  for (int64_t d = 1; d <= std::min<int64_t>(tiles, 64); ++d)
    if (tiles % d == 0 && d * stages >= 24)
      return static_cast<int>(d);
  return 1;
}

// FP8 swap-AB GEMM2 over a short K (DeepSeek's 2 stages, Qwen3's 6): several 64-column tiles a
// CTA, the fewest (a power of two up to 8) that give each CTA 8 stages, as both devices' tuned
// tiles (DeepSeek t4 at T = 4-256, Qwen3 t2-t8), while the CTAs stay at least four an SM. On an
// H100 against one tile a CTA: DeepSeek T = 4-256 3-15 % faster, t4 at T = 1 2 % slower (T = 1's
// own bucket, 8 experts, keeps one tile); Qwen3 T = 16-256 1-2 % faster.
int swap_short_k_tiles(const MoeShape& shape, int64_t experts_hit, int64_t sms) {
  const int64_t stages = gemm2_k_stages(shape);
  const int64_t columns = shape.hidden / 64;
  int tiles = 1;
  while (tiles < 8 && tiles * stages < 8 && columns % (tiles * 2) == 0 &&
         experts_hit * columns / (tiles * 2) >= 4 * sms)
    tiles *= 2;
  return tiles;
}

MoeTileConfig wgmma_default(const MoeShape& shape, int64_t per_expert, int64_t experts_hit,
                            int64_t sms) {
  MoeTileConfig c;
  auto tile = [](int block_n, int stages, bool swap_ab, int warpgroups) {
    return GemmTile::wgmma_tile(block_n, stages, swap_ab, warpgroups);
  };
  const bool fp8 = shape.dtype == MoeDType::fp8;
  if (per_expert <= (fp8 ? 16 : 32)) {
    // Swap-AB: the expert's weight rows fill wgmma's 64-row M, the few tokens its N.
    // FP8 from 5 to 16 tokens an expert (the mean): blocks of twice the mean, which most experts'
    // tokens fit in one, and GEMM1 one tile at a time from the dynamic schedule, as the H200's
    // and the H100's tuned tiles there (Qwen3 T = 256, Mixtral T = 64, DeepSeek T = 256;
    // docs/moe.md, "Tile configurations").
    const bool fp8_mid = fp8 && per_expert > 4;
    c.block_m = 8;
    while (c.block_m < (fp8_mid ? 2 * per_expert : per_expert))
      c.block_m *= 2;
    // Two warpgroups split K when the CTAs (64 output columns x expert) would not fill the GPU.
    auto split = [&](int64_t out_columns) {
      return experts_hit * (out_columns / 64) < sms ? 2 : 1;
    };
    // Packed GEMM1 tiles (32 output columns) double the CTAs when 64-column tiles are too few.
    const bool packed = experts_hit * (shape.intermediate / 64) < 2 * sms;
    c.gemm1 = tile(packed ? 64 : 128, 6, true, split(shape.intermediate));
    c.gemm2 = tile(64, 8, true, split(shape.hidden));
    if (fp8 && c.gemm2.warpgroups == 1) { // several tiles a CTA need one warpgroup
      c.gemm2.tiles = swap_short_k_tiles(shape, experts_hit, sms);
      // A CTA that streams fewer K stages than the shallowest pipeline (DeepSeek's 2 at one
      // tile a CTA: T = 1): 3 stages, the least wgmma takes, so that more CTAs fit an SM, as
      // both devices' tuned T = 1 tiles there. On an H100 0.89x the time of 8 stages at
      // DeepSeek T = 1 (Qwen3's 6 stages a CTA keep 8: 6 or 3 were 4-5 % slower).
      if (c.gemm2.tiles * gemm2_k_stages(shape) < moe_detail::k_wgmma_min_stages)
        c.gemm2.stages = moe_detail::k_wgmma_min_stages;
    }
    // FP8 GEMM1 where the experts hit give at most half as many CTAs as SMs (one token: DeepSeek's
    // 8 experts x 8 packed tiles): K split across a cluster of CTAs, the most (a power of two up
    // to 8) that still fit the GPU at once, 8 stages deep, as both devices' tuned T = 1 tiles
    // for DeepSeek (the H100's n64 g2 s8 k2, the H200's n128 g1 s6 k4: 128 CTAs); on an H100
    // 0.85x the time of the T <= 4 bucket's tiles there (docs/moe.md, "Tile configurations").
    // Only packed tiles get here: an unpacked one means at least twice as many CTAs as SMs.
    if (fp8 && !fp8_mid) {
      const int64_t ctas = experts_hit * (2 * shape.intermediate / c.gemm1.block_n);
      while (c.gemm1.split_k < 8 && ctas * c.gemm1.split_k * 2 <= sms)
        c.gemm1.split_k *= 2;
      if (c.gemm1.split_k > 1)
        c.gemm1.stages = 8;
    }
    if (fp8_mid) {
      c.gemm1.stages = 4;
      // The dynamic schedule takes 128-row tiles on one warpgroup only.
      if (!packed && c.gemm1.warpgroups == 1)
        c.gemm1.schedule = MoeSchedule::dynamic;
    }
  } else if (fp8 && per_expert <= 32) {
    // FP8 from 17 to 32 tokens an expert: the normal orientation in blocks of 64 tokens, one
    // warpgroup, as both devices' tuned tiles at DeepSeek T = 1024 (swap-AB blocks of 32 on f16
    // MMAs took 2.0x their time on an H100).
    c.block_m = 64;
    c.gemm1 = tile(128, 4, false, 1);
    c.gemm2 = tile(128, 4, false, 1);
    c.gemm2.tiles = short_k_tiles(shape, c.gemm2.block_n);
  } else if (fp8) {
    // The H200 table's prefill families: two warpgroups (blocks of 128 tokens), GEMM1 on the
    // sorted e4m3 copy of the tokens for top_k <= 2 from 256 tokens an expert, GEMM2 over the
    // whole K, both 256 weight rows wide where the outputs divide. On an H100 the table's tiles
    // ran 1.46-2.04x faster than the rule's before, f16 MMAs 128 wide (docs/moe.md, "Tile
    // configurations").
    c.block_m = 128;
    c.gemm1 = tile(wgmma_block_n(shape.intermediate, true), 4, false, 2);
    c.gemm1.sorted_tokens = shape.top_k <= 2 && per_expert >= 256;
    c.gemm2 = tile(wgmma_block_n(shape.hidden, false), 4, false, 2);
    c.gemm2.whole_k = true;
    c.gemm2.tiles = short_k_tiles(shape, c.gemm2.block_n);
  } else {
    const int warpgroups = per_expert <= 96 ? 1 : 2;
    c.block_m = 64 * warpgroups;
    c.gemm1 = tile(wgmma_block_n(shape.intermediate, true), 4, false, warpgroups);
    c.gemm2 = tile(wgmma_block_n(shape.hidden, false), 4, false, warpgroups);
  }
  // FP8 GEMM1 at every token count on e4m3 tensor cores over the whole K: no conversion of the
  // weight stream, as the two devices' row-major tuned FP8 GEMM1 tiles mostly are (19 of 22 at
  // up to 4 tokens an expert, 5 of 6 from 5 to 16, all 14 from 17); at 1-4 tokens an expert
  // 0.92-1.01x the f16 path's time on an H100 (docs/moe.md, "Tile configurations"). Exact
  // accumulation turns it into f16 MMAs, as for the table's tiles.
  c.gemm1.e4m3 = c.gemm1.whole_k = fp8;
  return c;
}

} // namespace

MoeTileConfig default_moe_config(const MoeShape& shape, int64_t tokens,
                                 const runtime::DeviceFacts& target) {
  const Arch& arch = target.arch;
  const int64_t slots = std::max<int64_t>(tokens, 1) * shape.top_k;
  const int64_t per_expert = (slots + shape.experts - 1) / std::max<int64_t>(shape.experts, 1);
  const int64_t experts_hit = std::min(shape.experts, slots);
  const int64_t sms = target.multiprocessors;
  if (arch.major == 9 && arch.minor == 0 && arch.arch_specific) {
    MoeTileConfig c = wgmma_default(shape, per_expert, experts_hit, sms);
    llvm::Error err = check_moe_config(shape, c, arch);
    while (err && c.gemm1.split_k > 1) { // e.g. a K that does not split so far: split it less
      llvm::consumeError(std::move(err));
      c.gemm1.split_k /= 2;
      err = check_moe_config(shape, c, arch);
    }
    if (!err)
      return c;
    llvm::consumeError(std::move(err)); // e.g. a shape whose tiles do not fit: mma.sync
  }
  return mma_default(shape, per_expert, experts_hit, sms);
}

MoeTileConfig default_moe_config(const MoeShape& shape, int64_t tokens, const Arch& arch) {
  return default_moe_config(shape, tokens, runtime::DeviceFacts::for_target(arch));
}

} // namespace specjit::ops
