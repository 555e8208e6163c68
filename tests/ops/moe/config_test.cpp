// The fused MoE's tile configurations and tables without a GPU (ops/moe/config.h): each
// tile family's rules against the shape and the architecture, the tuned table's JSON (written,
// read back, its errors named), the H200 table in docs, and the variants its entries compile to.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/config.h"
#include "ops/moe/detail.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"

#include "kernels_src/moe/dynamic_order.h"

#include "support/error.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

TEST_CASE("tile configurations are checked against the shape") {
  MoeShape shape{128, 8, 2048, 768, MoeDType::fp8};
  for (int64_t tokens : {1, 4, 16, 64, 256, 1024, 4096, 100000})
    CHECK(!check_moe_config(shape, default_moe_config(shape, tokens)));
  MoeTileConfig bad = default_moe_config(shape, 1);
  bad.gemm2.block_n = 48;
  CHECK(static_cast<bool>(check_moe_config(shape, bad)));
  llvm::consumeError(check_moe_config(shape, bad));
  bad = default_moe_config(shape, 1);
  bad.block_m = 12;
  ErrorSummary error = summarize(check_moe_config(shape, bad));
  CHECK(error.message.find("block_m") != std::string::npos);
}

TEST_CASE("wgmma tiles follow their orientation's rules and need sm_90a") {
  MoeShape shape{128, 8, 2048, 768, MoeDType::fp8};
  const Arch sm90a{9, 0, true}, sm90{9, 0, false};
  // The default rule: swap-AB while few tokens reach each expert, the normal orientation beyond.
  MoeTileConfig small = default_moe_config(shape, 4, sm90a);
  CHECK(small.gemm1.kernel == MoeGemmKernel::wgmma);
  CHECK(small.gemm1.swap_ab);
  CHECK(small.gemm1.block_n == 128); // 64 gate + 64 up rows per warpgroup
  CHECK(small.gemm2.block_n == 64);
  MoeTileConfig big = default_moe_config(shape, 4096, sm90a);
  CHECK(big.gemm1.kernel == MoeGemmKernel::wgmma);
  CHECK(!big.gemm1.swap_ab);
  CHECK(big.block_m == 64 * big.gemm1.warpgroups);
  // FP8 prefill: the H200 table's families, GEMM1 on e4m3 tensor cores and both GEMMs over the
  // whole K, 256 wide in two warpgroups, GEMM2 several tiles a CTA where its K is short (at
  // least 24 stages a CTA); the sorted e4m3 copy of the tokens for top-2 models from 256 tokens
  // an expert. bf16 keeps its tiles.
  CHECK(big.describe() == "m128 g1[wgmma n256 g2 s4 e4m3w] g2[wgmma n256 g2 s4 t4 e4m3w]");
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  CHECK(default_moe_config(mixtral, 4096, sm90a).gemm1.sorted_tokens);
  CHECK(!default_moe_config(mixtral, 256, sm90a).gemm1.sorted_tokens); // 64 tokens an expert
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};
  CHECK(default_moe_config(deepseek, 4096, sm90a).describe() ==
        "m128 g1[wgmma n256 g2 s4 e4m3w] g2[wgmma n256 g2 s4 t14 e4m3w]");
  CHECK(default_moe_config(mixtral, 4096, sm90a).gemm2.tiles == 1); // K: 112 stages
  MoeShape bf16 = shape;
  bf16.dtype = MoeDType::bf16;
  const MoeTileConfig big_bf16 = default_moe_config(bf16, 4096, sm90a);
  CHECK(!big_bf16.gemm1.e4m3);
  CHECK(!big_bf16.gemm2.whole_k);
  // Without sm_90a the rule falls back to mma.sync, and a wgmma tile is refused by name.
  CHECK(default_moe_config(shape, 4, sm90).gemm1.kernel == MoeGemmKernel::mma);
  ErrorSummary arch = summarize(check_moe_config(shape, small, sm90));
  CHECK(arch.message.find("wgmma needs sm_90a") != std::string::npos);
  MoeTileConfig bad = small;
  bad.gemm1.block_n = 256;
  ErrorSummary swap = summarize(check_moe_config(shape, bad, sm90a));
  CHECK(swap.message.find("swap-AB needs block_n = 128 or 64") != std::string::npos);
  bad.gemm1.block_n = 64; // packed: 32 gate over 32 up rows
  CHECK(!check_moe_config(shape, bad, sm90a));
  bad.gemm1.warpgroups = 2; // K split across warpgroups: each keeps its own stages
  bad.gemm1.stages = 5;
  CHECK(summarize(check_moe_config(shape, bad, sm90a)).message.find("2 warpgroups needs an even") !=
        std::string::npos);
  bad.gemm1.stages = 6;
  CHECK(!check_moe_config(shape, bad, sm90a));
  bad = small;
  bad.block_m = 24;
  CHECK(summarize(check_moe_config(shape, bad, sm90a)).message.find("block_m in 8") !=
        std::string::npos);
  bad = big;
  bad.block_m = 32;
  CHECK(summarize(check_moe_config(shape, bad, sm90a)).message.find("64 x warpgroups") !=
        std::string::npos);
  bad = big;
  bad.gemm2.stages = 2;
  CHECK(summarize(check_moe_config(shape, bad, sm90a)).message.find("at least 3") !=
        std::string::npos);
  // Shared memory: the stages, the f16 copy of FP8 GEMM1's B operand (swap-AB: the token tile,
  // double-buffered; normal: the weight tile, one buffer per K half) and 1024 bytes to align
  // the tiles.
  CHECK(moe_gemm_shared_bytes(8, small.gemm2, MoeDType::bf16, 2) == (8u + 64) * 128 * 8 + 1024);
  CHECK(moe_gemm_shared_bytes(8, small.gemm2, MoeDType::fp8, 1) ==
        (8u + 64) * 128 * 8 + 4 * 8 * 128 + 1024);
  CHECK(moe_gemm_shared_bytes(8, small.gemm2, MoeDType::fp8, 2) == (8u + 64) * 128 * 8 + 1024);
  const GemmTile normal = GemmTile::wgmma_tile(128, 4, false, 2);
  // The normal orientation also stages its bf16 outputs, 16 rows x up to 128 bytes a warp: GEMM1's
  // 64 columns here, GEMM2's 128 columns 128 bytes at a time (FP8 GEMM1 does not stage).
  CHECK(moe_gemm_shared_bytes(128, normal, MoeDType::fp8, 1) ==
        (128u + 128) * 128 * 4 + 2 * 128 * 128 + 1024);
  CHECK(moe_gemm_shared_bytes(128, normal, MoeDType::bf16, 1) ==
        (128u + 128) * 128 * 4 + 2 * 4 * 16 * 128 + 1024);
  CHECK(moe_gemm_shared_bytes(128, normal, MoeDType::fp8, 2) ==
        (128u + 128) * 128 * 4 + 2 * 4 * 16 * 128 + 1024);
  // FP8 GEMM1 256 columns wide in two warpgroups: 3 stages fit (209 KiB), 4 do not.
  MoeTileConfig wide{128, GemmTile::wgmma_tile(256, 3, false, 2), normal};
  CHECK(moe_gemm_shared_bytes(128, wide.gemm1, MoeDType::fp8, 1) ==
        (128u + 256) * 128 * 3 + 2 * 256 * 128 + 1024);
  CHECK(!check_moe_config(shape, wide, sm90a));
  wide.gemm1.stages = 4;
  CHECK(summarize(check_moe_config(shape, wide, sm90a)).message.find("227 KiB of shared memory") !=
        std::string::npos);
  // An FP8 GEMM2 256 wide would hold 256 fp32 sums a thread (each stage's and the totals) and
  // spills: refused; bf16 (no promotion) keeps it.
  MoeTileConfig wide2{64, GemmTile::wgmma_tile(128, 4, false, 1),
                      GemmTile::wgmma_tile(256, 4, false, 1)};
  CHECK(summarize(check_moe_config(shape, wide2, sm90a)).message.find("block_n 256 spills") !=
        std::string::npos);
  MoeShape bf16_shape = shape;
  bf16_shape.dtype = MoeDType::bf16;
  CHECK(!check_moe_config(bf16_shape, wide2, sm90a));
}

TEST_CASE("split-K clusters: swap-AB only, K in whole stages per CTA, partials that fit") {
  const Arch sm90a{9, 0, true};
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};     // GEMM1 16 stages, GEMM2 6
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8}; // GEMM2: 2 stages of K
  MoeTileConfig c{8, GemmTile::wgmma_tile(128, 6, true, 1, 4),
                  GemmTile::wgmma_tile(64, 8, true, 1, 2)};
  CHECK(!check_moe_config(qwen, c, sm90a));
  CHECK(!check_moe_config(deepseek, c, sm90a));
  CHECK(c.describe() == "m8 g1[wgmma-swap n128 g1 s6 k4] g2[wgmma-swap n64 g1 s8 k2]");
  CHECK(c.gemm1.threads(1) == 160u);
  CHECK(GemmTile::wgmma_tile(128, 4, false, 2).threads(1) == 384u); // four producer warps
  CHECK(GemmTile::wgmma_tile(128, 4, false, 2).threads(2) == 288u);
  MoeTileConfig bad = c;
  bad.gemm1.split_k = 3;
  CHECK(config_refusal(qwen, bad).find("split_k must be 1, 2, 4 or 8") != std::string::npos);
  bad = c;
  bad.gemm2.split_k = 4; // GEMM2 K = 768: 6 stages do not split in 4
  CHECK(config_refusal(qwen, bad).find("does not split into 4 parts") != std::string::npos);
  bad = c;
  bad.gemm2.warpgroups = 2; // DeepSeek GEMM2: one stage per CTA, two warpgroups want two
  CHECK(config_refusal(deepseek, bad).find("at least 2 stages") != std::string::npos);
  bad = c;
  bad.gemm1 = GemmTile::wgmma_tile(128, 4, false, 2, 2);
  bad.block_m = 128;
  CHECK(config_refusal(qwen, bad).find("split_k and stream_k need the swap-AB orientation") !=
        std::string::npos);
  // The normal orientation takes several tiles per CTA (up to 64, any count that divides its
  // outputs' tiles: DeepSeek GEMM2's 56 tiles of 128 in CTAs of 14), whole tiles of its outputs.
  bad.gemm1 = GemmTile::wgmma_tile(128, 4, false, 2, 1, 4);  // 768 = 3 x 4 x 64
  bad.gemm2 = GemmTile::wgmma_tile(128, 4, false, 2, 1, 16); // 2048 = 16 x 128
  CHECK(!check_moe_config(qwen, bad, sm90a));
  CHECK(bad.describe() == "m128 g1[wgmma n128 g2 s4 t4] g2[wgmma n128 g2 s4 t16]");
  bad.gemm1.tiles = 8;
  CHECK(config_refusal(qwen, bad).find("768 output columns are not a multiple of 8 tiles of 64") !=
        std::string::npos);
  bad.gemm1.tiles = 1;
  bad.gemm2.tiles = 32;
  CHECK(config_refusal(qwen, bad).find(
            "2048 output columns are not a multiple of 32 tiles of 128") != std::string::npos);
  bad.gemm2.tiles = 65;
  CHECK(config_refusal(qwen, bad).find("tiles must be 1 to 64") != std::string::npos);
  MoeTileConfig fourteen{128, GemmTile::wgmma_tile(256, 3, false, 2),
                         GemmTile::wgmma_tile(128, 4, false, 2, 1, 14)};
  CHECK(!check_moe_config(deepseek, fourteen, sm90a)); // 7168 = 14 x 4 x 128
  fourteen.gemm2.tiles = 16;
  CHECK(config_refusal(deepseek, fourteen).find("not a multiple of 16 tiles") != std::string::npos);
  bad = c;
  bad.block_m = 64; // 7 x 2 x 64 x 64 x 4 bytes of partials > 3 stages of 192 rows
  bad.gemm1 = GemmTile::wgmma_tile(128, 3, true, 1, 8);
  CHECK(config_refusal(qwen, bad).find("partial sums") != std::string::npos);
  bad = c;
  bad.gemm2.tiles = 4;
  CHECK(config_refusal(qwen, bad).find("several tiles per CTA need") !=
        std::string::npos); // + split_k
  bad.gemm2.split_k = 1;
  CHECK(!check_moe_config(qwen, bad, sm90a));
  CHECK(bad.gemm2.describe() == "wgmma-swap n64 g1 s8 t4");
  bad.gemm2.warpgroups = 2;
  CHECK(config_refusal(qwen, bad).find("several tiles per CTA need one warpgroup") !=
        std::string::npos);
  bad = c;
  bad.gemm1.tiles = 8;
  bad.gemm1.split_k = 1; // 768 outputs: 12 tiles of 64, not whole 8s
  CHECK(config_refusal(qwen, bad).find("not a multiple of 8 tiles") != std::string::npos);
  // The table keeps split_k (and leaves it out when it is 1).
  MoeConfigTable table;
  table.entries.push_back({qwen, sm90a, {{1, c}}});
  CHECK(round_trip_json(table).find("\"split_k\":4") != std::string::npos);
}

TEST_CASE("stream-K tiles: swap-AB, one warpgroup, unpacked, blocks of up to 32; kept by the "
          "table's JSON") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  const MoeTileConfig c{32, stream_k_tile(128, 4), stream_k_tile(64, 6)};
  CHECK(config_refusal(qwen, c).empty());
  CHECK(c.gemm1.describe() == "wgmma-swap n128 g1 s4 sk");
  MoeTileConfig bad = c;
  bad.block_m = 64;
  CHECK(config_refusal(qwen, bad).find("stream_k needs block_m <= 32") != std::string::npos);
  bad = c;
  bad.gemm1.block_n = 64; // packed GEMM1
  CHECK(config_refusal(qwen, bad).find("stream_k needs one warpgroup, no split_k, one tile and an "
                                       "unpacked tile") != std::string::npos);
  bad = c;
  bad.gemm2.warpgroups = 2;
  CHECK(config_refusal(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = c;
  bad.gemm2.tiles = 2;
  CHECK(config_refusal(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = c;
  bad.gemm2.split_k = 2;
  CHECK(config_refusal(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = MoeTileConfig{128, GemmTile::wgmma_tile(128, 4, false, 2), c.gemm2};
  bad.gemm1.schedule = MoeSchedule::stream_k;
  CHECK(config_refusal(qwen, bad).find("split_k and stream_k need the swap-AB orientation") !=
        std::string::npos);
  bad = MoeTileConfig{16, GemmTile{64, 1, 4, 4}, GemmTile{64, 1, 4, 4}};
  bad.gemm2.schedule = MoeSchedule::stream_k;
  CHECK(config_refusal(qwen, bad).find(
            "stream_k, dynamic, f16_tokens and reads need a wgmma tile") != std::string::npos);
  // The table keeps stream_k (and leaves it out when false); a non-boolean is named.
  MoeConfigTable table;
  table.entries.push_back({qwen, sm90a, {{64, c}}});
  std::string text = round_trip_json(table);
  CHECK(text.find("\"stream_k\":true") != std::string::npos);
  // The dynamic schedule: the same rules but any block size (not both schedules at once: the
  // JSON check below).
  const MoeTileConfig d{64, dynamic_tile(128, 4), dynamic_tile(64, 6)};
  CHECK(config_refusal(qwen, d).empty());
  CHECK(d.gemm2.describe() == "wgmma-swap n64 g1 s6 dyn");
  bad = d;
  bad.gemm1.block_n = 64;
  CHECK(config_refusal(qwen, bad).find("dynamic needs one warpgroup") != std::string::npos);
  // The normal orientation takes the dynamic schedule too, one tile at a time.
  MoeTileConfig n{128, GemmTile::wgmma_tile(256, 4, false, 2),
                  GemmTile::wgmma_tile(128, 4, false, 2)};
  n.gemm1.e4m3 = n.gemm1.whole_k = true;
  n.gemm1.schedule = n.gemm2.schedule = MoeSchedule::dynamic;
  CHECK(config_refusal(qwen, n).empty());
  CHECK(n.describe() == "m128 g1[wgmma n256 g2 s4 dyn e4m3w] g2[wgmma n128 g2 s4 dyn]");
  bad = n;
  bad.gemm2.tiles = 4;
  CHECK(config_refusal(qwen, bad).find("dynamic takes its tiles one at a time") !=
        std::string::npos);
  // A dynamic CTA keeps one token block's indices, as a fixed one does: 7 stages of 32 KiB fit
  // either way, 8 neither.
  MoeTileConfig deep = n;
  deep.gemm1.block_n = 128;
  deep.gemm1.stages = 7;
  CHECK(config_refusal(qwen, deep).empty());
  deep.gemm1.stages = 8;
  CHECK(config_refusal(qwen, deep).find("KiB of shared memory") != std::string::npos);
  deep.gemm1.schedule = MoeSchedule::fixed;
  CHECK(config_refusal(qwen, deep).find("KiB of shared memory") != std::string::npos);
  table.entries[0].buckets.push_back({256, d});
  CHECK(round_trip_json(table).find("\"dynamic\":true") != std::string::npos);
  CHECK(table_error(text, "\"stream_k\":true", "\"stream_k\":1")
            .find("'stream_k' must be a boolean") != std::string::npos);
  CHECK(table_error(text, "\"stream_k\":true", "\"stream_k\":true,\"dynamic\":true")
            .find("stream_k and dynamic are two schedules: pick one") != std::string::npos);
}

TEST_CASE("f16-token GEMM1 tiles: FP8 swap-AB, 64 output columns a warpgroup, fixed or dynamic "
          "schedule; kept by the JSON, their variants compile without spills or serialized "
          "wgmma") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  const GemmTile gemm2 = GemmTile::wgmma_tile(128, 4, false, 2);
  const MoeTileConfig c{128, f16_tokens_tile(2, 3), gemm2};
  CHECK(config_refusal(qwen, c).empty());
  CHECK(c.gemm1.describe() == "wgmma-swap n256 g2 s3 f16");
  CHECK(c.gemm1.threads(1) == 2 * 128 + 4 * 32); // four producer warps gather the f16 rows
  // Stages of 256 weight rows and 128 token rows of 256 bytes, no f16 copy of the B operand, and
  // the outputs' staging: 128 tokens x 64 columns a warpgroup.
  CHECK(moe_gemm_shared_bytes(128, c.gemm1, MoeDType::fp8, 1) ==
        3 * (256 + 2 * 128) * 128 + 1024 + 2 * 128 * 64);
  CHECK(moe_gemm_shared_bytes(64, f16_tokens_tile(1, 4), MoeDType::fp8, 1) ==
        4 * (128 + 2 * 64) * 128 + 1024 + 64 * 64);
  MoeTileConfig bad = c;
  bad.gemm1.block_n = 128; // one warpgroup's columns with two warpgroups
  CHECK(config_refusal(qwen, bad).find("f16_tokens needs block_n = 128 x warpgroups = 256") !=
        std::string::npos);
  bad = c;
  bad.gemm1.swap_ab = false;
  CHECK(config_refusal(qwen, bad).find("f16_tokens needs swap_ab") != std::string::npos);
  bad = c;
  bad.gemm1.split_k = 2;
  CHECK(config_refusal(qwen, bad).find(
            "f16_tokens needs no split_k and the fixed or dynamic schedule") != std::string::npos);
  bad = c;
  bad.gemm1.schedule = MoeSchedule::stream_k;
  CHECK(config_refusal(qwen, bad).find(
            "f16_tokens needs no split_k and the fixed or dynamic schedule") != std::string::npos);
  // The dynamic schedule: one tile at a time from its counter.
  bad = c;
  bad.gemm1.schedule = MoeSchedule::dynamic;
  CHECK(config_refusal(qwen, bad).empty());
  CHECK(bad.gemm1.describe() == "wgmma-swap n256 g2 s3 dyn f16");
  bad.gemm1.tiles = 3;
  CHECK(config_refusal(qwen, bad).find("f16_tokens with the dynamic schedule needs tiles 1") !=
        std::string::npos);
  bad = c;
  bad.gemm1.tiles = 4; // 6 tiles of 128 columns
  CHECK(
      config_refusal(qwen, bad).find("f16_tokens: 768 output columns are not a multiple of 4 tiles "
                                     "of 128") != std::string::npos);
  bad.gemm1.tiles = 3;
  CHECK(config_refusal(qwen, bad).empty());
  bad = MoeTileConfig{256, f16_tokens_tile(1, 3), gemm2};
  bad.gemm2 = GemmTile::wgmma_tile(64, 4, true, 1);
  CHECK(config_refusal(qwen, bad).find("f16_tokens needs block_m in 8, 16, 32, 64, 128") !=
        std::string::npos);
  MoeShape bf16 = qwen;
  bf16.dtype = MoeDType::bf16;
  CHECK(config_refusal(bf16, {64, f16_tokens_tile(1, 4), GemmTile::wgmma_tile(64, 4, true, 1)})
            .find("f16_tokens is for FP8 GEMM1") != std::string::npos);
  // The hand-off counts every warpgroup's epilogue warps: they own different columns.
  TunedMoeOptions always;
  always.handoff = MoeHandoff::always;
  CHECK(moe_detail::handoff_target(qwen, 1024, c, always, 100) == 6 * 8);
  // JSON keeps the flag (absent when false); a non-boolean is named.
  MoeConfigTable table;
  table.entries.push_back({qwen, sm90a, {{1024, c}}});
  std::string text = round_trip_json(table);
  CHECK(text.find("\"f16_tokens\":true") != std::string::npos);
  CHECK(table_error(text, "\"f16_tokens\":true", "\"f16_tokens\":2")
            .find("'f16_tokens' must be a boolean") != std::string::npos);
  // The copy kernel is among the call's variants. Its order follows top_k: Qwen3 (top 8) in token
  // order (GEMM1's template value swap_ab 2, the copy's sorted 0), Mixtral (top 2) in the sorted
  // order (3 and 1).
  TunedMoeOptions options;
  options.config = c;
  for (const auto& [shape, swap_ab] : {std::pair{qwen, 2}, std::pair{mixtral, 3}}) {
    CHECK(moe_detail::f16_tokens_sorted(shape) == (swap_ab == 3));
    auto requests = fused_moe_variants(shape, options, sm90a, {1024});
    REQUIRE(static_cast<bool>(requests));
    int copies = 0;
    for (const VariantRequest& request : *requests) {
      if (request.def.id == "moe_tokens_f16") {
        ++copies;
        CHECK(request.values[0] == (swap_ab == 3 ? 1 : 0));
      }
      if (request.def.id == "moe_wgmma1_fp8")
        CHECK(request.values[2] == swap_ab);
    }
    CHECK(copies == 1);
  }
  // Compiled: two warpgroups (registers moved from the producers) and one, blocks of 128 and 64,
  // both orders of the copy (Qwen3: gathered, Mixtral: TMA boxes).
  TempDir dir;
  Engine engine(test::config_in(dir));
  for (const auto& [shape, config] :
       {std::pair{qwen, c},
        std::pair{qwen,
                  MoeTileConfig{64, f16_tokens_tile(2, 4), GemmTile::wgmma_tile(128, 4, false, 1)}},
        std::pair{mixtral,
                  MoeTileConfig{64, f16_tokens_tile(1, 4), GemmTile::wgmma_tile(128, 4, false, 1)}},
        std::pair{mixtral, MoeTileConfig{128, f16_tokens_tile(2, 3), gemm2}},
        std::pair{qwen, MoeTileConfig{128, f16_tokens_tile(2, 3, 3), gemm2}},
        // The dynamic schedule: four producer warps share the counter's tiles.
        std::pair{mixtral,
                  MoeTileConfig{128, f16_tokens_tile(2, 3, 1, MoeSchedule::dynamic), gemm2}},
        std::pair{qwen, MoeTileConfig{64, f16_tokens_tile(1, 4, 1, MoeSchedule::dynamic),
                                      GemmTile::wgmma_tile(128, 4, false, 1)}}})
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
}

TEST_CASE("a tuned table overrides the default rule for its shape only") {
  const char* json = R"({"version": 1, "entries": [{"experts": 128, "intermediate": 768,
    "hidden": 2048, "top_k": 8, "dtype": "fp8", "arch": "sm_90a", "buckets": [
    {"max_tokens": 8, "block_m": 16, "gemm1": {"block_n": 32, "warps_m": 1, "warps_n": 2,
     "stages": 5}, "gemm2": {"block_n": 64, "warps_m": 1, "warps_n": 4, "stages": 4}},
    {"max_tokens": 512, "block_m": 64, "gemm1": {"block_n": 128, "warps_m": 2, "warps_n": 2,
     "stages": 4}, "gemm2": {"block_n": 128, "warps_m": 2, "warps_n": 2, "stages": 4}}]}]})";
  auto table = parse_moe_config_table(json);
  REQUIRE_MESSAGE(static_cast<bool>(table), llvm::toString(table.takeError()));
  MoeShape shape{128, 8, 2048, 768, MoeDType::fp8};
  auto small = resolve_moe_config(shape, 3, Arch{9, 0, true}, &*table);
  REQUIRE(static_cast<bool>(small));
  CHECK(small->bucket == 8);
  CHECK(small->config.gemm1.stages == 5);
  auto big = resolve_moe_config(shape, 9999, Arch{9, 0, true}, &*table);
  REQUIRE(static_cast<bool>(big));
  CHECK(big->bucket == 512);
  CHECK(big->config.block_m == 64);
  MoeShape other = shape;
  other.dtype = MoeDType::bf16;
  auto fallback = resolve_moe_config(other, 3, Arch{9, 0, true}, &*table);
  REQUIRE(static_cast<bool>(fallback));
  CHECK(fallback->bounds == default_moe_buckets());
  // The table survives a round trip through JSON.
  CHECK(table->entries.size() == 1);
  round_trip_json(*table);
}

TEST_CASE("wgmma tiles survive the table's JSON and bad kernel fields are named") {
  MoeConfigTable table;
  MoeConfigEntry entry{MoeShape{128, 8, 2048, 768, MoeDType::fp8}, Arch{9, 0, true}, {}};
  MoeTileConfig swap{8, GemmTile::wgmma_tile(64, 8, true, 2), GemmTile::wgmma_tile(64, 6, true, 1)};
  MoeTileConfig normal{128, GemmTile::wgmma_tile(128, 4, false, 2),
                       GemmTile::wgmma_tile(128, 4, false, 2)};
  entry.buckets = {{1, swap}, {4096, normal}};
  table.entries.push_back(entry);
  std::string text = round_trip_json(table);
  // An unknown kernel, and a wgmma tile without its orientation, are refused by name.
  CHECK(table_error(text, "\"wgmma\"", "\"wmma\"").find("kernel must be \"mma\" or \"wgmma\"") !=
        std::string::npos);
  CHECK(table_error(text, "\"swap_ab\"", "\"swap_xx\"").find("missing boolean 'swap_ab'") !=
        std::string::npos);
}

TEST_CASE("e4m3 GEMM1 tiles keep whole_k and sorted_tokens through the table's JSON") {
  MoeConfigTable table;
  MoeConfigEntry entry{MoeShape{8, 2, 4096, 14336, MoeDType::fp8}, Arch{9, 0, true}, {}};
  MoeTileConfig promoted{128, GemmTile::wgmma_tile(256, 4, false, 2),
                         GemmTile::wgmma_tile(128, 4, false, 2)};
  promoted.gemm1.e4m3 = true;
  MoeTileConfig sorted = promoted;
  sorted.gemm1.whole_k = sorted.gemm1.sorted_tokens = true;
  entry.buckets = {{1024, promoted}, {4096, sorted}};
  table.entries.push_back(entry);
  const std::string text = round_trip_json(table);
  CHECK(text.find("\"whole_k\":true") != std::string::npos);
  CHECK(text.find("\"sorted_tokens\":true") != std::string::npos);
  CHECK(table_error(text, "\"sorted_tokens\":true", "\"sorted_tokens\":1").find("sorted_tokens") !=
        std::string::npos);
}

TEST_CASE("the H200 table's packed entries compile clean, as variants of their own") {
  const MoeConfigTable* table = &builtin_moe_config_table(); // ops/moe/tables/moe-configs.json
  TempDir dir;
  Engine engine(test::config_in(dir));
  int packed_buckets = 0;
  for (const MoeConfigEntry& entry : table->entries) {
    if (entry.weights != MoeWeightLayout::packed)
      continue;
    for (const MoeConfigBucket& bucket : entry.buckets) {
      INFO(bucket.config.describe());
      CHECK(check_wgmma_variants_compile(engine, entry.shape, bucket.config,
                                         MoeWeightLayout::packed) == 2);
      ++packed_buckets;
    }
  }
  CHECK(packed_buckets > 0);
}

// The dynamic schedule's order of its items (kernels_src/moe/dynamic_order.h, the kernels' own
// code): every (token block, tile) exactly once, in groups of consecutive blocks that each tile
// visits in turn (block-major for groups of one), the last group holding the blocks left.
TEST_CASE("the dynamic schedule's items cover every block and tile once, in groups of blocks") {
  for (int tiles : {1, 2, 6, 16, 112})
    for (int group : {1, 3, 8})
      for (int blocks = 1; blocks <= 41; blocks += 4) {
        INFO("tiles " << tiles << ", group " << group << ", blocks " << blocks);
        std::set<std::pair<int, int>> seen;
        for (int item = 0; item < blocks * tiles; ++item) {
          const auto it = specjit_kernels::moe_dynamic_item(item, blocks, group, tiles);
          REQUIRE(it.m_block >= 0);
          REQUIRE(it.m_block < blocks);
          REQUIRE(it.tile >= 0);
          REQUIRE(it.tile < tiles);
          CHECK(it.first % group == 0);
          CHECK(it.count == std::min(group, blocks - it.first));
          CHECK(it.m_block >= it.first);
          CHECK(it.m_block < it.first + it.count);
          CHECK(seen.insert({it.m_block, it.tile}).second);
          // A group's items: tile by tile, each over the group's blocks in order.
          const int in_group = item - it.first * tiles;
          CHECK(it.tile == in_group / it.count);
          CHECK(it.m_block - it.first == in_group % it.count);
        }
        CHECK(seen.size() == static_cast<size_t>(blocks) * tiles);
      }
}
