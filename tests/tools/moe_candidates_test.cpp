// The tuner's candidates (tools/bench/moe_candidates.h), without a GPU: every tile it would time
// is one the runtime accepts for its GEMM and block size, the rule's configuration is among them,
// and a candidate set covers both orientations where the crossover is measured.
#include "moe_candidates.h"

#include "ops/moe/tuning.h"

#include "engine_fixture.h"
#include "support/error.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <string_view>

using namespace specjit;
using namespace specjit::ops;

namespace {

const Arch k_sm90a{9, 0, true};
const MoeShape k_shapes[] = {{128, 8, 2048, 768, MoeDType::fp8},
                             {8, 2, 4096, 14336, MoeDType::fp8},
                             {256, 8, 7168, 256, MoeDType::fp8},
                             {128, 8, 2048, 768, MoeDType::bf16}};

bool has(const std::vector<GemmTile>& list, const GemmTile& t) {
  return std::find(list.begin(), list.end(), t) != list.end();
}

} // namespace

TEST_CASE("every tuner candidate is a tile the runtime accepts, the rule's among them") {
  for (const MoeShape& s : k_shapes)
    for (int64_t tokens : {1, 4, 16, 64, 256, 1024, 4096}) {
      INFO("experts " << s.experts << " " << moe_dtype_name(s.dtype).str() << " T=" << tokens);
      const std::vector<bench::MoeCandidateBlock> blocks =
          bench::moe_candidates(s, tokens, k_sm90a);
      REQUIRE(!blocks.empty());
      bool swap = false, normal = false;
      for (const bench::MoeCandidateBlock& b : blocks) {
        CHECK(!b.gemm1.empty());
        CHECK(!b.gemm2.empty());
        for (int gemm : {1, 2})
          for (const GemmTile& t : gemm == 1 ? b.gemm1 : b.gemm2) {
            CHECK(specjit::summarize(check_moe_gemm_tile(s, gemm, b.block_m, t, k_sm90a)).message ==
                  "");
            swap |= bench::moe_tile_family(t) == std::string_view("swap_ab");
            normal |= bench::moe_tile_family(t) == std::string_view("normal");
          }
        // The configurations to precompile use every tile, and each is valid as a whole.
        const std::vector<MoeTileConfig> configs = bench::moe_candidate_configs(b);
        for (const MoeTileConfig& c : configs)
          CHECK(specjit::summarize(check_moe_config(s, c, k_sm90a)).message == "");
        for (const GemmTile& t : b.gemm1)
          CHECK(std::any_of(configs.begin(), configs.end(),
                            [&](const MoeTileConfig& c) { return c.gemm1 == t; }));
        for (const GemmTile& t : b.gemm2)
          CHECK(std::any_of(configs.begin(), configs.end(),
                            [&](const MoeTileConfig& c) { return c.gemm2 == t; }));
      }
      CHECK(normal); // the crossover is measured at every T
      // Whether any block's GEMM1 candidates hold a tile with `flag` set.
      auto any_gemm1 = [&](bool GemmTile::*flag) {
        return std::any_of(blocks.begin(), blocks.end(), [&](const auto& b) {
          return std::any_of(b.gemm1.begin(), b.gemm1.end(),
                             [&](const GemmTile& t) { return t.*flag; });
        });
      };
      // FP8 GEMM1 on the f16 copy of the tokens from 16 tokens an expert on.
      CHECK(any_gemm1(&GemmTile::f16_tokens) ==
            (s.dtype == MoeDType::fp8 && tokens * s.top_k >= 16 * s.experts));
      // FP8 GEMM1 on e4m3 tensor cores over the whole K at every T, promoted at prefill (256
      // tokens and more) only.
      CHECK(any_gemm1(&GemmTile::whole_k) == (s.dtype == MoeDType::fp8));
      CHECK(std::any_of(blocks.begin(), blocks.end(), [&](const auto& b) {
              return std::any_of(b.gemm1.begin(), b.gemm1.end(),
                                 [&](const GemmTile& t) { return t.e4m3 && !t.whole_k; });
            }) == (s.dtype == MoeDType::fp8 && tokens >= 256));
      // Every whole-K GEMM1 tile is the e4m3 twin of a tile also timed as it is, or of one the
      // rules refuse (on f16 MMAs it needs the shared memory of the weights' f16 copy).
      for (const auto& b : blocks)
        for (const GemmTile& t : b.gemm1)
          if (t.whole_k && !t.sorted_tokens) {
            GemmTile plain = t;
            plain.e4m3 = plain.whole_k = false;
            llvm::Error refused = check_moe_gemm_tile(s, 1, b.block_m, plain, k_sm90a);
            CHECK((has(b.gemm1, plain) || static_cast<bool>(refused)));
            llvm::consumeError(std::move(refused));
          }
      // ... and on the sorted e4m3 copy of the tokens for the top-2 models (Mixtral) there.
      CHECK(any_gemm1(&GemmTile::sorted_tokens) ==
            (s.dtype == MoeDType::fp8 && tokens >= 256 && s.top_k <= 2));
      // FP8 GEMM2 over the whole K at prefill, 256 wide in the normal orientation among them.
      const bool prefill_fp8 = s.dtype == MoeDType::fp8 && tokens >= 256;
      auto any_gemm2 = [&](auto&& pred) {
        return std::any_of(blocks.begin(), blocks.end(), [&](const auto& b) {
          return std::any_of(b.gemm2.begin(), b.gemm2.end(), pred);
        });
      };
      CHECK(any_gemm2([](const GemmTile& t) { return t.whole_k; }) == prefill_fp8);
      CHECK(any_gemm2([](const GemmTile& t) {
              return t.whole_k && !t.swap_ab && t.block_n == 256;
            }) == prefill_fp8);
      if (tokens * s.top_k <= 64 * s.experts)
        CHECK(swap);
      const MoeTileConfig rule = default_moe_config(s, tokens, k_sm90a);
      auto at = std::find_if(blocks.begin(), blocks.end(), [&](const bench::MoeCandidateBlock& b) {
        return b.block_m == rule.block_m;
      });
      REQUIRE(at != blocks.end());
      CHECK(has(at->gemm1, rule.gemm1));
      CHECK(has(at->gemm2, rule.gemm2));
    }
}

TEST_CASE("Mixtral at T = 256: f16-token tiles in blocks of twice the average") {
  // 64 tokens an expert on average: blocks of 128 hold the experts routed more than average
  // (the table's pick), beside the normal orientation's GEMM2 in the same blocks.
  const MoeShape mixtral = k_shapes[1];
  const std::vector<bench::MoeCandidateBlock> blocks = bench::moe_candidates(mixtral, 256, k_sm90a);
  auto at = std::find_if(blocks.begin(), blocks.end(),
                         [](const bench::MoeCandidateBlock& b) { return b.block_m == 128; });
  REQUIRE(at != blocks.end());
  GemmTile f16 = GemmTile::wgmma_tile(256, 3, true, 2);
  f16.f16_tokens = true;
  CHECK(has(at->gemm1, f16));
  CHECK(has(at->gemm2, GemmTile::wgmma_tile(128, 4, false, 2)));
}

TEST_CASE("the crossover families of tiles and configurations") {
  const GemmTile swap = GemmTile::wgmma_tile(128, 6, true, 1);
  const GemmTile normal = GemmTile::wgmma_tile(128, 4, false, 1);
  const GemmTile mma{64, 1, 4, 4};
  CHECK(std::string_view(bench::moe_tile_family(swap)) == "swap_ab");
  CHECK(std::string_view(bench::moe_tile_family(normal)) == "normal");
  CHECK(std::string_view(bench::moe_tile_family(mma)) == "mma");
  CHECK(std::string_view(bench::moe_family({8, swap, swap})) == "swap_ab");
  CHECK(std::string_view(bench::moe_family({64, swap, normal})) == "mixed");
  CHECK(std::string_view(bench::moe_family({64, normal, mma})) == "mma");
}

TEST_CASE("the tuner times together the two best of each GEMM, each family's and each "
          "schedule's best") {
  const GemmTile s1 = GemmTile::wgmma_tile(128, 4, true, 1),
                 s2 = GemmTile::wgmma_tile(64, 4, true, 1);
  const GemmTile s3 = GemmTile::wgmma_tile(128, 6, true, 2);
  const GemmTile n1 = GemmTile::wgmma_tile(256, 3, false, 2),
                 n2 = GemmTile::wgmma_tile(128, 4, false, 2);
  const GemmTile m1{64, 1, 4, 4}, m2{32, 1, 2, 6};
  // Ranked fastest first, as the tuner times them alone.
  const std::vector<GemmTile> gemm1 = {s1, s2, n1, s3, m1};
  const std::vector<GemmTile> gemm2 = {n2, s3, s2, m2};
  // The table's configuration is timed anyway; it is not added twice.
  std::vector<MoeTileConfig> pairs = {{32, s1, n2}};
  bench::moe_tune_pairs(32, gemm1, gemm2, pairs);
  const std::vector<MoeTileConfig> want = {{32, s1, n2}, {32, s1, s3}, {32, s2, n2},
                                           {32, s2, s3},  // the two best of each, crossed
                                           {32, s1, s3},  // best swap-AB pair (a repeat)
                                           {32, n1, n2},  // best normal pair
                                           {32, m1, m2}}; // best mma.sync pair
  for (const MoeTileConfig& c : want)
    CHECK_MESSAGE(std::count(pairs.begin(), pairs.end(), c) == 1, c.describe());
  CHECK(pairs.size() == 6);
  // Each GEMM's best tile of a persistent schedule is timed with the other's best and with
  // the other's best of that schedule, however far down the fixed routing ranked it.
  GemmTile d1 = GemmTile::wgmma_tile(128, 6, true, 1), d2 = GemmTile::wgmma_tile(64, 6, true, 1);
  d1.schedule = d2.schedule = MoeSchedule::dynamic;
  GemmTile k1 = GemmTile::wgmma_tile(128, 4, true, 1);
  k1.schedule = MoeSchedule::stream_k;
  std::vector<MoeTileConfig> persistent;
  bench::moe_tune_pairs(8, {s1, s2, n1, d1, k1}, {s2, s3, d2}, persistent);
  for (const MoeTileConfig& c : std::vector<MoeTileConfig>{
           {8, d1, s2}, {8, s1, d2}, {8, d1, d2}, {8, k1, s2}})
    CHECK_MESSAGE(std::count(persistent.begin(), persistent.end(), c) == 1, c.describe());
  CHECK(persistent.size() == 8); // the 4 crossed (GEMM2 has no normal tile), then the 4 above
  // A family missing from one GEMM has no pair; one tile per GEMM gives one pair.
  std::vector<MoeTileConfig> single;
  bench::moe_tune_pairs(8, {s1}, {n2}, single);
  REQUIRE(single.size() == 1);
  CHECK(single[0] == MoeTileConfig{8, s1, n2});
}

TEST_CASE("the tuner times only tiles that compile without spills or wgmma diagnostics") {
  test::TempDir dir;
  runtime::Engine engine(test::config_in(dir));
  const MoeShape qwen = k_shapes[0];
  // The swap-AB tiles of the tuned table compile clean...
  const MoeTileConfig swap{8, GemmTile::wgmma_tile(128, 6, true, 1),
                           GemmTile::wgmma_tile(64, 8, true, 1)};
  const auto row_major = MoeWeightLayout::row_major, packed = MoeWeightLayout::packed;
  const auto automatic = MoePackedReads::automatic;
  for (int gemm : {1, 2}) {
    auto clean = bench::moe_gemm_compiles_clean(engine, qwen, swap, gemm, 16, row_major, automatic);
    REQUIRE_MESSAGE(static_cast<bool>(clean), llvm::toString(clean.takeError()));
    CHECK(*clean);
    // ... and so do their variants that read packed weights (by bulk copies, or a rank-4 map).
    for (MoePackedReads reads : {automatic, MoePackedReads::tensor_map}) {
      auto packed_clean =
          bench::moe_gemm_compiles_clean(engine, qwen, swap, gemm, 16, packed, reads);
      REQUIRE_MESSAGE(static_cast<bool>(packed_clean), llvm::toString(packed_clean.takeError()));
      CHECK(*packed_clean);
    }
  }
  // ... an FP8 GEMM1 tile 128 rows wide on one warp spills (ptxas: 24 bytes), so the tuner
  // skips it, while the configuration's narrower GEMM2 tile is clean: each GEMM is judged by
  // its own kernel.
  const MoeTileConfig mma{32, {128, 1, 1, 4}, {64, 1, 1, 4}};
  auto gemm1 = bench::moe_gemm_compiles_clean(engine, qwen, mma, 1, 16, row_major, automatic);
  REQUIRE_MESSAGE(static_cast<bool>(gemm1), llvm::toString(gemm1.takeError()));
  CHECK_FALSE(*gemm1);
  auto gemm2 = bench::moe_gemm_compiles_clean(engine, qwen, mma, 2, 16, row_major, automatic);
  REQUIRE_MESSAGE(static_cast<bool>(gemm2), llvm::toString(gemm2.takeError()));
  CHECK(*gemm2);
  // A GEMM number other than 1 or 2 is an error that names it.
  auto none = bench::moe_gemm_compiles_clean(engine, qwen, swap, 3, 16, row_major, automatic);
  REQUIRE_FALSE(static_cast<bool>(none));
  CHECK(llvm::toString(none.takeError()).find("no GEMM3 kernel") != std::string::npos);
}

TEST_CASE("a tune on packed weights times each wgmma tile in both read forms") {
  const GemmTile swap = GemmTile::wgmma_tile(128, 4, true, 1);
  const std::vector<GemmTile> forms = bench::moe_read_forms(swap);
  REQUIRE(forms.size() == 2);
  CHECK(forms[0].packed_reads == MoePackedReads::bulk);
  CHECK(forms[1].packed_reads == MoePackedReads::tensor_map);
  for (GemmTile form : forms) { // the same tile otherwise
    form.packed_reads = MoePackedReads::automatic;
    CHECK(form == swap);
  }
  const GemmTile mma{64, 1, 4, 4};
  REQUIRE(bench::moe_read_forms(mma).size() == 1);
  CHECK(bench::moe_read_forms(mma)[0] == mma);
  // A configuration's forms: both GEMMs bulk, then both through the map; an mma.sync GEMM as it
  // is in both. Every form compiles into the variants the tune then times.
  const MoeShape qwen = k_shapes[0];
  const auto configs = bench::moe_read_forms(MoeTileConfig{8, swap, mma});
  REQUIRE(configs.size() == 2);
  CHECK(configs[0].gemm1.packed_reads == MoePackedReads::bulk);
  CHECK(configs[1].gemm1.packed_reads == MoePackedReads::tensor_map);
  CHECK(configs[0].gemm2 == mma);
  CHECK(configs[1].gemm2 == mma);
  const MoeTileConfig wgmma_pair{8, swap, GemmTile::wgmma_tile(64, 4, true, 1)};
  int form = 0;
  for (const MoeTileConfig& c : bench::moe_read_forms(wgmma_pair)) {
    ++form;
    TunedMoeOptions options;
    options.config = c;
    auto requests =
        fused_moe_variants(qwen, options, Arch{9, 0, true}, {16}, MoeWeightLayout::packed);
    REQUIRE(static_cast<bool>(requests));
    int gemms = 0;
    for (const runtime::VariantRequest& r : *requests)
      if (r.def.id == "moe_wgmma1_fp8" || r.def.id == "moe_wgmma2_fp8") {
        ++gemms;
        // The template value weights: packed_bulk (1), then packed_map (2).
        REQUIRE(r.def.params[10].name == "weights");
        CHECK(r.values[10] == form);
      }
    CHECK(gemms == 2);
  }
}

TEST_CASE("a tune on packed weights takes only the tiles that read them, and all of them") {
  for (const MoeShape& s : k_shapes)
    for (int64_t tokens : {1, 4, 16, 64, 256, 1024, 4096}) {
      INFO("experts " << s.experts << " " << moe_dtype_name(s.dtype).str() << " T=" << tokens);
      const auto packed = bench::moe_candidates(s, tokens, k_sm90a, MoeWeightLayout::packed);
      REQUIRE(!packed.empty());
      for (const bench::MoeCandidateBlock& b : packed) {
        CHECK(!b.gemm1.empty());
        CHECK(!b.gemm2.empty());
        for (int gemm : {1, 2})
          for (const GemmTile& t : gemm == 1 ? b.gemm1 : b.gemm2)
            CHECK(moe_tile_reads_packed(gemm, t));
      }
      // The row-major candidates that read packed weights are all there, over the same block
      // size (where that block size keeps tiles for both GEMMs).
      for (const bench::MoeCandidateBlock& b : bench::moe_candidates(s, tokens, k_sm90a)) {
        auto at = std::find_if(packed.begin(), packed.end(),
                               [&](const auto& p) { return p.block_m == b.block_m; });
        const bool both =
            std::any_of(b.gemm1.begin(), b.gemm1.end(),
                        [](const GemmTile& t) { return moe_tile_reads_packed(1, t); }) &&
            std::any_of(b.gemm2.begin(), b.gemm2.end(),
                        [](const GemmTile& t) { return moe_tile_reads_packed(2, t); });
        REQUIRE((at != packed.end()) == both);
        if (!both)
          continue;
        for (int gemm : {1, 2})
          for (const GemmTile& t : gemm == 1 ? b.gemm1 : b.gemm2)
            CHECK(has(gemm == 1 ? at->gemm1 : at->gemm2, t) == moe_tile_reads_packed(gemm, t));
      }
    }
  // The mma.sync tiles of part 1 never read packed weights; a wgmma tile's stage (GEMM1: each
  // half) holds whole pieces of 32 rows.
  CHECK_FALSE(moe_tile_reads_packed(1, GemmTile{64, 1, 4, 4}));
  CHECK(moe_tile_reads_packed(1, GemmTile::wgmma_tile(64, 4, true, 1)));
  CHECK(moe_tile_reads_packed(2, GemmTile::wgmma_tile(32, 4, true, 1)));
  CHECK_FALSE(moe_tile_reads_packed(1, GemmTile::wgmma_tile(32, 4, true, 1)));
}

TEST_CASE("the tuner's engine does not report its own candidates as a recompile storm") {
  Config config; // defaults: the storm threshold is 8 distinct values
  REQUIRE(config.storm_threshold.value == 8);
  bench::configure_for_tuning(config);
  CHECK(config.storm_threshold.value == bench::k_tune_storm_threshold);
  CHECK(config.storm_threshold.source == SettingSource::api);
  // A threshold the user set (SPECJIT_STORM_THRESHOLD) stays.
  Config set_by_user;
  set_by_user.storm_threshold.set(3, SettingSource::environment);
  bench::configure_for_tuning(set_by_user);
  CHECK(set_by_user.storm_threshold.value == 3);
  CHECK(set_by_user.storm_threshold.source == SettingSource::environment);
}
