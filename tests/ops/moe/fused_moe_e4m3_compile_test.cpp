// fused_moe's FP8 accumulation without a GPU: GEMM1 on e4m3 tensor cores (promoted, over the
// whole K, on the sorted copy of the tokens) and GEMM2 over the whole K compile for sm_90a with
// zero spills and no wgmma serialization diagnostic, are refused where they do not apply, and
// run as the f16 and promoted tiles under exact accumulation, the built-in table's included.
// The other special variants and the argument checks: fused_moe_compile_test.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/builtin_table.h"
#include "ops/moe/detail.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/plan.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"

#include <algorithm>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

// The reference shapes in FP8 (../shared/KERNELS.md).
const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};

TEST_CASE("GEMM1 on e4m3 tensor cores compiles for sm_90a without spills or serialized wgmma, "
          "and only for FP8 GEMM1 tiles that hold its registers") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto e4m3 = [](GemmTile t) {
    t.e4m3 = true;
    return t;
  };
  // Swap-AB: packed, two MMAs in one warpgroup up to 128 tokens and in two up to 64, split-K,
  // dynamic; normal orientation 128 and 256 wide in two warpgroups (256: registers moved from
  // the producers).
  for (const auto& [shape, config] :
       {std::pair{qwen, MoeTileConfig{8, e4m3(GemmTile::wgmma_tile(64, 4, true, 1)),
                                      GemmTile::wgmma_tile(64, 4, true, 1)}},
        std::pair{qwen, MoeTileConfig{64, e4m3(GemmTile::wgmma_tile(128, 6, true, 2)),
                                      GemmTile::wgmma_tile(64, 4, true, 1)}},
        std::pair{qwen, MoeTileConfig{16, e4m3(GemmTile::wgmma_tile(128, 6, true, 1, 2)),
                                      GemmTile::wgmma_tile(64, 4, true, 1)}},
        std::pair{mixtral, MoeTileConfig{128, e4m3(dynamic_tile(128, 4)), dynamic_tile(64, 4)}},
        std::pair{mixtral, MoeTileConfig{128, e4m3(GemmTile::wgmma_tile(128, 5, false, 2)),
                                         GemmTile::wgmma_tile(128, 4, false, 2)}},
        std::pair{mixtral, MoeTileConfig{128, e4m3(GemmTile::wgmma_tile(256, 4, false, 2)),
                                         GemmTile::wgmma_tile(128, 4, false, 2)}}}) {
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
    MoeTileConfig whole_k = config; // the same tiles accumulating over the whole K
    whole_k.gemm1.whole_k = true;
    CHECK(check_wgmma_variants_compile(engine, shape, whole_k) == 2);
  }
  // And refused where it does not apply, naming why.
  MoeTileConfig gemm2_e4m3{64, GemmTile::wgmma_tile(128, 4, true, 1),
                           e4m3(GemmTile::wgmma_tile(64, 4, true, 1))};
  CHECK(config_refusal(qwen, gemm2_e4m3).find("e4m3 is for FP8 GEMM1") != std::string::npos);
  MoeShape qwen_bf16 = qwen;
  qwen_bf16.dtype = MoeDType::bf16;
  MoeTileConfig bf16{64, e4m3(GemmTile::wgmma_tile(128, 4, true, 1)),
                     GemmTile::wgmma_tile(64, 4, true, 1)};
  CHECK(config_refusal(qwen_bf16, bf16).find("e4m3 is for FP8 GEMM1") != std::string::npos);
  MoeTileConfig wide{128, e4m3(GemmTile::wgmma_tile(128, 6, true, 2)),
                     GemmTile::wgmma_tile(64, 4, true, 1)};
  CHECK(config_refusal(qwen, wide)
            .find("e4m3 swap-AB needs block_m <= 128 (<= 64 with 2 warpgroups)") !=
        std::string::npos);
  MoeTileConfig f16 = MoeTileConfig{64, e4m3(GemmTile::wgmma_tile(256, 4, true, 2)),
                                    GemmTile::wgmma_tile(64, 4, true, 1)};
  f16.gemm1.f16_tokens = true;
  CHECK(config_refusal(qwen, f16).find("not with f16_tokens") != std::string::npos);
  MoeTileConfig unpromoted{64, GemmTile::wgmma_tile(128, 4, true, 1),
                           GemmTile::wgmma_tile(64, 4, true, 1)};
  unpromoted.gemm1.whole_k = true;
  CHECK(config_refusal(qwen, unpromoted).find("whole_k is for e4m3 GEMM1 tiles") !=
        std::string::npos);
  MoeTileConfig mma{16, e4m3(GemmTile{}), GemmTile{}};
  CHECK(config_refusal(qwen, mma).find("e4m3 needs a wgmma tile") != std::string::npos);
  // Exact accumulation runs the f16 kernel on the same tile: the option is the caller's.
  TunedMoeOptions exact;
  exact.config = MoeTileConfig{128, e4m3(GemmTile::wgmma_tile(128, 5, false, 2)),
                               GemmTile::wgmma_tile(128, 4, false, 2)};
  auto fast = fused_moe_variants(mixtral, exact, Arch{9, 0, true}, {1024});
  exact.accumulation = MoeAccumulation::exact;
  auto exact_variants = fused_moe_variants(mixtral, exact, Arch{9, 0, true}, {1024});
  REQUIRE(static_cast<bool>(fast));
  REQUIRE(static_cast<bool>(exact_variants));
  auto gemm1_kernel = [](const std::vector<VariantRequest>& requests) {
    for (const VariantRequest& r : requests)
      if (r.def.id.rfind("moe_wgmma1", 0) == 0)
        return r.def.id;
    return std::string();
  };
  CHECK(gemm1_kernel(*fast) == "moe_wgmma1_e4m3");
  CHECK(gemm1_kernel(*exact_variants) == "moe_wgmma1_fp8");
  exact.config->gemm1.whole_k = true; // whole_k: its own kernel, also turned off by `exact`
  auto whole_k_variants = fused_moe_variants(mixtral, exact, Arch{9, 0, true}, {1024});
  exact.accumulation = MoeAccumulation::e4m3;
  auto unpromoted_variants = fused_moe_variants(mixtral, exact, Arch{9, 0, true}, {1024});
  REQUIRE(static_cast<bool>(whole_k_variants));
  REQUIRE(static_cast<bool>(unpromoted_variants));
  CHECK(gemm1_kernel(*whole_k_variants) == "moe_wgmma1_fp8");
  CHECK(gemm1_kernel(*unpromoted_variants) == "moe_wgmma1_e4m3w");
}

TEST_CASE("FP8 GEMM2 over the whole K compiles without spills, 256 wide in the normal "
          "orientation, is refused where it does not apply and runs promoted under exact") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto whole = [](GemmTile t) {
    t.whole_k = true;
    return t;
  };
  GemmTile gemm1 = GemmTile::wgmma_tile(256, 4, false, 2);
  gemm1.e4m3 = gemm1.whole_k = true;
  // Normal 256 wide (several tiles a CTA, 3 and 4 stages) and 128 wide, swap-AB, dynamic.
  for (const auto& [shape, config] :
       {std::pair{mixtral,
                  MoeTileConfig{128, gemm1, whole(GemmTile::wgmma_tile(256, 4, false, 2))}},
        std::pair{qwen,
                  MoeTileConfig{128, gemm1, whole(GemmTile::wgmma_tile(256, 3, false, 2, 1, 4))}},
        std::pair{deepseek,
                  MoeTileConfig{128, gemm1, whole(GemmTile::wgmma_tile(128, 4, false, 2, 1, 14))}},
        std::pair{qwen, MoeTileConfig{32, GemmTile::wgmma_tile(128, 4, true, 1),
                                      whole(GemmTile::wgmma_tile(64, 6, true, 1))}},
        std::pair{mixtral, MoeTileConfig{32, dynamic_tile(128, 4), whole(dynamic_tile(64, 4))}}}) {
    INFO(config.describe());
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
  }
  CHECK(whole(GemmTile::wgmma_tile(256, 4, false, 2)).describe() == "wgmma n256 g2 s4 e4m3w");
  // Promoted, 256 wide spills; bf16 GEMM2 and mma.sync tiles have no whole_k.
  MoeTileConfig promoted{128, gemm1, GemmTile::wgmma_tile(256, 4, false, 2)};
  CHECK(config_refusal(mixtral, promoted).find("use 128 or whole_k") != std::string::npos);
  MoeShape mixtral_bf16 = mixtral;
  mixtral_bf16.dtype = MoeDType::bf16;
  MoeTileConfig bf16{128, GemmTile::wgmma_tile(256, 3, false, 2),
                     whole(GemmTile::wgmma_tile(128, 4, false, 2))};
  CHECK(config_refusal(mixtral_bf16, bf16).find("whole_k is for") != std::string::npos);
  MoeTileConfig mma{16, GemmTile{}, whole(GemmTile{})};
  CHECK(config_refusal(qwen, mma).find("whole_k is for") != std::string::npos);
  // Its own kernel; `exact` runs the promoted one, 128 wide.
  TunedMoeOptions options;
  options.config = MoeTileConfig{128, gemm1, whole(GemmTile::wgmma_tile(256, 4, false, 2))};
  auto gemm2_of = [&](MoeAccumulation accumulation) {
    options.accumulation = accumulation;
    auto variants = fused_moe_variants(mixtral, options, Arch{9, 0, true}, {4096});
    REQUIRE_MESSAGE(static_cast<bool>(variants), llvm::toString(variants.takeError()));
    for (const VariantRequest& r : *variants)
      if (r.def.id.rfind("moe_wgmma2", 0) == 0)
        return std::pair{r.def.id, r.values[4]}; // block_n
    return std::pair{std::string(), int64_t{0}};
  };
  CHECK(gemm2_of(MoeAccumulation::e4m3) ==
        std::pair{std::string("moe_wgmma2_e4m3w"), int64_t{256}});
  CHECK(gemm2_of(MoeAccumulation::exact) == std::pair{std::string("moe_wgmma2_fp8"), int64_t{128}});
}

TEST_CASE("the built-in table's e4m3 and whole-K tiles compile clean as the tiles exact "
          "accumulation runs, on both weight layouts") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  TunedMoeOptions exact;
  exact.accumulation = MoeAccumulation::exact;
  int compiled = 0, fewer_stages = 0;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries)
    for (const MoeConfigBucket& bucket : entry.buckets) {
      const MoeTileConfig& table = bucket.config;
      if (!table.gemm1.e4m3 && !table.gemm2.whole_k)
        continue; // exact runs the table's own tiles, compiled by the manifests' test
      const DeviceFacts device = DeviceFacts::for_target(entry.arch, entry.device);
      auto plan =
          moe_detail::plan_fused_moe(entry.shape, bucket.max_tokens, device, exact, entry.weights);
      REQUIRE_MESSAGE(static_cast<bool>(plan), llvm::toString(plan.takeError()));
      INFO(entry.device << ": " << table.describe() << " -> " << plan->config.describe());
      CHECK(check_wgmma_variants_compile(engine, entry.shape, plan->config, entry.weights) == 2);
      ++compiled;
      fewer_stages += plan->config.gemm1.stages < table.gemm1.stages;
    }
  CHECK(compiled >= 7);
  // The 4-stage 256-wide GEMM1 tiles run with 3 beside their f16 weight copy.
  CHECK(fewer_stages >= 6);
}

TEST_CASE("GEMM1 on the sorted e4m3 copy of the tokens compiles without spills, is planned after "
          "the copy, and only for e4m3 normal tiles of top-2 models") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto sorted = [](GemmTile t, bool whole_k) {
    t.e4m3 = t.sorted_tokens = true;
    t.whole_k = whole_k;
    return t;
  };
  // The table's Mixtral prefill tiles and their neighbours: 256 wide in two warpgroups (with two
  // tiles a CTA), 128 wide in one; promoted and over the whole K.
  for (const bool whole_k : {false, true})
    for (const MoeTileConfig& config :
         {MoeTileConfig{128, sorted(GemmTile::wgmma_tile(256, 4, false, 2, 1, 2), whole_k),
                        GemmTile::wgmma_tile(128, 4, false, 2)},
          MoeTileConfig{128, sorted(GemmTile::wgmma_tile(256, 3, false, 2), whole_k),
                        GemmTile::wgmma_tile(128, 4, false, 2)},
          MoeTileConfig{64, sorted(GemmTile::wgmma_tile(128, 4, false, 1), whole_k),
                        GemmTile::wgmma_tile(128, 4, false, 1)}}) {
      INFO(config.describe());
      CHECK(check_wgmma_variants_compile(engine, mixtral, config) == 2);
    }
  CHECK(sorted(GemmTile::wgmma_tile(256, 4, false, 2), true).describe() ==
        "wgmma n256 g2 s4 sorted e4m3w");
  // The plan copies the tokens first (moe_tokens_f16, sorted 2); exact accumulation turns the
  // copy off with the e4m3 MMAs.
  TunedMoeOptions options;
  options.config = MoeTileConfig{128, sorted(GemmTile::wgmma_tile(256, 4, false, 2), true),
                                 GemmTile::wgmma_tile(128, 4, false, 2)};
  auto variants = fused_moe_variants(mixtral, options, Arch{9, 0, true}, {4096});
  REQUIRE_MESSAGE(static_cast<bool>(variants), llvm::toString(variants.takeError()));
  std::vector<std::string> ids;
  for (const VariantRequest& r : *variants) {
    ids.push_back(r.def.id);
    if (r.def.id == "moe_tokens_f16")
      CHECK(r.values == std::vector<int64_t>{2, 4096});
    if (r.def.id == "moe_wgmma1_e4m3w")
      CHECK(r.values[2] == 4); // MoeOrientation::normal_sorted
  }
  CHECK(std::find(ids.begin(), ids.end(), "moe_tokens_f16") != ids.end());
  CHECK(std::find(ids.begin(), ids.end(), "moe_wgmma1_e4m3w") != ids.end());
  options.accumulation = MoeAccumulation::exact;
  auto exact = fused_moe_variants(mixtral, options, Arch{9, 0, true}, {4096});
  REQUIRE(static_cast<bool>(exact));
  for (const VariantRequest& r : *exact) {
    CHECK(r.def.id != "moe_tokens_f16");
    if (r.def.id == "moe_wgmma1_fp8")
      CHECK(r.values[2] == 0); // MoeOrientation::normal
  }
  // Refused, naming why: without e4m3, swap-AB, a top-8 model, blocks over 128.
  MoeTileConfig plain{128, GemmTile::wgmma_tile(256, 4, false, 2),
                      GemmTile::wgmma_tile(128, 4, false, 2)};
  plain.gemm1.sorted_tokens = true;
  CHECK(config_refusal(mixtral, plain).find("sorted_tokens is for e4m3 tiles") !=
        std::string::npos);
  const char* rule = "sorted_tokens needs the normal orientation, top_k <= 2 and block_m <= 128";
  CHECK(config_refusal(mixtral,
                       MoeTileConfig{64, sorted(GemmTile::wgmma_tile(128, 4, true, 1), false),
                                     GemmTile::wgmma_tile(64, 4, true, 1)})
            .find(rule) != std::string::npos);
  CHECK(
      config_refusal(qwen, MoeTileConfig{128, sorted(GemmTile::wgmma_tile(256, 4, false, 2), false),
                                         GemmTile::wgmma_tile(128, 4, false, 2)})
          .find(rule) != std::string::npos);
}

TEST_CASE("the dynamic schedule in the normal orientation compiles without spills or serialized "
          "wgmma, in every GEMM1 precision and for GEMM2") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto dynamic = [](GemmTile t, bool e4m3 = false, bool whole_k = false, bool sorted = false) {
    t.schedule = MoeSchedule::dynamic;
    t.e4m3 = e4m3;
    t.whole_k = whole_k;
    t.sorted_tokens = sorted;
    return t;
  };
  const MoeShape qwen_bf16{128, 8, 2048, 768, MoeDType::bf16};
  // Two warpgroups 256 wide (registers moved from the gathering producers, or from the one that
  // loads the sorted copy), one warpgroup 128 wide; GEMM1 over the whole K, promoted and exact
  // (the f16 copy of the weights); GEMM2 promoted and over the whole K (256 wide); bf16.
  for (const auto& [shape, config] :
       {std::pair{qwen,
                  MoeTileConfig{128, dynamic(GemmTile::wgmma_tile(256, 4, false, 2), true, true),
                                dynamic(GemmTile::wgmma_tile(128, 4, false, 2))}},
        std::pair{mixtral,
                  MoeTileConfig{128,
                                dynamic(GemmTile::wgmma_tile(256, 4, false, 2), true, true, true),
                                dynamic(GemmTile::wgmma_tile(256, 3, false, 2), false, true)}},
        std::pair{deepseek, MoeTileConfig{64, dynamic(GemmTile::wgmma_tile(128, 4, false, 1), true),
                                          dynamic(GemmTile::wgmma_tile(128, 4, false, 1))}},
        std::pair{qwen, MoeTileConfig{128, dynamic(GemmTile::wgmma_tile(256, 3, false, 2)),
                                      dynamic(GemmTile::wgmma_tile(128, 4, false, 2))}},
        std::pair{qwen_bf16, MoeTileConfig{128, dynamic(GemmTile::wgmma_tile(256, 3, false, 2)),
                                           dynamic(GemmTile::wgmma_tile(128, 4, false, 2))}}}) {
    INFO(config.describe());
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
  }
}

TEST_CASE("the default rule's FP8 prefill tiles compile without spills or serialized wgmma, on "
          "both weight layouts") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  const MoeShape qwen_64{64, 8, 2048, 768, MoeDType::fp8}; // a shape the table lacks
  for (const MoeShape& shape : {qwen, mixtral, deepseek, qwen_64})
    for (const int64_t tokens : {256, 4096}) {
      const MoeTileConfig config = default_moe_config(shape, tokens, Arch{9, 0, true});
      INFO(config.describe());
      if (config.gemm1.swap_ab)
        continue; // decode tiles (DeepSeek T = 256)
      CHECK(config.gemm1.e4m3);
      for (const MoeWeightLayout layout : {MoeWeightLayout::row_major, MoeWeightLayout::packed})
        CHECK(check_wgmma_variants_compile(engine, shape, config, layout) == 2);
    }
}
