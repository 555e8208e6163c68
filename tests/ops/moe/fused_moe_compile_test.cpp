// fused_moe without a GPU: its special variants (split-K, multi-tile, stream-K, the stable
// grouping) compile for sm_90a with zero spills and no wgmma serialization diagnostic (ptxas
// C7515) through the engine's prepare, and the op validates its arguments on the host before
// anything touches a device. Tile rules and tables: config_test; packed weights:
// fused_moe_packed_test; the reference models' manifests: tests/deploy/example_manifests_test.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/builtin_table.h"
#include "ops/moe/detail.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/plan.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"

#include "support/error.h"

#include <algorithm>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

namespace {

void check_rejected(const MoeArgs& args, const std::string& fragment) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  check_invalid_argument(fused_moe(engine, args.shape, args.t, FusedMoeOptions{}, nullptr),
                         fragment);
  CHECK(engine.stats().requests == 0);
}

} // namespace

TEST_CASE("moe_align compiles, stable at every chunking of its counters (8 to 1024 experts)") {
  // Stable: 32 chunks up to 256 experts, 16 up to 512, 8 up to 1024, 32 KB of counters at most,
  // under the 48 KB of static shared memory; otherwise one.
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto id = engine.add_kernel(moe_align_kernel());
  REQUIRE(static_cast<bool>(id));
  for (int64_t stable : {0, 1})
    for (int64_t experts : {8, 256, 257, 512, 1024}) {
      auto variant = engine.prepare(*id, {experts, 16, stable, 100});
      REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
      INFO((*variant)->name_expression);
      CHECK((*variant)->spill_bytes == 0);
      CHECK((*variant)->shared_bytes <= 48 * 1024);
      const int64_t chunks = !stable ? 1 : experts <= 256 ? 32 : experts <= 512 ? 16 : 8;
      CHECK((*variant)->shared_bytes >= chunks * experts * 4);
    }
}

TEST_CASE("the grouping is stable exactly when a GEMM is stream-K") {
  MoeTileConfig config{16, GemmTile::wgmma_tile(128, 4, true, 1),
                       GemmTile::wgmma_tile(64, 4, true, 1)};
  using moe_detail::moe_slot_order;
  CHECK(moe_slot_order(config) == MoeSlotOrder::any);
  config.gemm2.schedule = MoeSchedule::stream_k;
  CHECK(moe_slot_order(config) == MoeSlotOrder::stable);
  config.gemm2.schedule = MoeSchedule::dynamic;
  CHECK(moe_slot_order(config) == MoeSlotOrder::any);
  config.gemm1.schedule = MoeSchedule::stream_k;
  CHECK(moe_slot_order(config) == MoeSlotOrder::stable);
  // And the manifest derives the stable align variant for such a configuration.
  TunedMoeOptions options;
  options.config = config;
  auto requests =
      fused_moe_variants({128, 8, 2048, 768, MoeDType::fp8}, options, Arch{9, 0, true}, {1});
  REQUIRE(static_cast<bool>(requests));
  int stable_aligns = 0;
  for (const VariantRequest& request : *requests)
    if (request.def.id == "moe_align")
      stable_aligns += request.values.at(2) == 1;
  CHECK(stable_aligns == 1);
}

TEST_CASE("fused_moe names the argument whose shape, dtype or alignment is wrong") {
  SUBCASE("hidden dtype") {
    MoeArgs a(4);
    a.t.hidden.dtype = DType::bf16;
    check_rejected(a, "hidden: expected e4m3[*, 256], got bf16[4, 256]");
  }
  SUBCASE("w13 shape") {
    MoeArgs a(4);
    a.t.w13.shape = {8, 128, 256};
    check_rejected(a, "w13: expected e4m3[8, 256, 256]");
  }
  SUBCASE("w2 transposed") {
    MoeArgs a(4);
    a.t.w2.shape = {8, 128, 256};
    check_rejected(a, "w2: expected e4m3[8, 256, 128]");
  }
  SUBCASE("router logits tokens") {
    MoeArgs a(4);
    a.t.router_logits.shape = {3, 8};
    check_rejected(a, "router_logits: expected f32[4, 8]");
  }
  SUBCASE("w13_scale per expert") {
    MoeArgs a(4);
    a.t.w13_scale.shape = {1};
    check_rejected(a, "w13_scale: expected f32[8]");
  }
  SUBCASE("out dtype") {
    MoeArgs a(4);
    a.t.out.dtype = DType::f32;
    check_rejected(a, "out: expected bf16[4, 256]");
  }
  SUBCASE("misaligned hidden") {
    MoeArgs a(4);
    a.t.hidden.data += 8;
    check_rejected(a, "hidden: data address");
  }
  SUBCASE("strided w2") {
    MoeArgs a(4);
    a.t.w2.strides = {256 * 128, 1, 256};
    check_rejected(a, "w2: expected a contiguous");
  }
  SUBCASE("small workspace") {
    MoeArgs a(4);
    a.t.workspace.shape = {1024};
    check_rejected(a, "workspace: needs at least");
  }
  SUBCASE("intermediate not a multiple of 128 bytes") {
    MoeArgs a(4);
    a.shape.intermediate = 100;
    check_rejected(a, "intermediate must be a positive multiple of 128");
  }
  SUBCASE("top_k above the expert count") {
    MoeArgs a(4);
    a.shape.top_k = 9;
    check_rejected(a, "top_k must be in [1, min(experts, 32)]");
  }
}

TEST_CASE("the stage ops name themselves and the argument in their errors") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto rejected = [](llvm::Error err, const std::string& prefix) {
    check_invalid_argument(std::move(err), prefix, true);
  };
  const TensorRef ids{k_fake_base, DType::i32, {4, 2}, {}};
  // 8 slots over 8 experts in blocks of 16: up to 128 padded rows, 8 blocks.
  const TensorRef sorted{k_fake_base + 0x10000, DType::i32, {128}, {}},
      experts{k_fake_base + 0x20000, DType::i32, {7}, {}},
      padded{k_fake_base + 0x30000, DType::i32, {1}, {}};
  rejected(moe_align(engine, ids, 8, 16, sorted, experts, padded, false, nullptr),
           "moe_align: expert_ids: needs at least 8 elements, got i32[7]");
  rejected(moe_align(engine, ids, 8, 512, sorted, experts, padded, false, nullptr),
           "moe_align: block_m must be in [1, 256], got 512");
  rejected(moe_align(engine, ids, 1, 16, sorted, experts, padded, false, nullptr),
           "moe_align: top_k must be in [1, min(experts, 32)], got 2");
  const TensorRef logits{k_fake_base, DType::bf16, {4, 8}, {}},
      weights{k_fake_base + 0x10000, DType::f32, {4, 2}, {}};
  rejected(moe_route(engine, logits, weights, ids, true, nullptr), "moe_route: router_logits: ");
  CHECK(engine.stats().requests == 0);
}

TEST_CASE("split-K, multi-tile and 256-wide variants compile for sm_90a without spills or "
          "serialized wgmma") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  // Swap-AB split-K and tiles; normal-orientation tiles (FP8 GEMM1's half-step conversion,
  // GEMM2's e4m3 K loop); FP8 GEMM1 256 columns wide in one warpgroup and in two (registers
  // moved from the producers with setmaxnreg: at the even share it spills and serializes).
  for (const MoeTileConfig& config :
       {MoeTileConfig{8, GemmTile::wgmma_tile(64, 8, true, 2, 2),
                      GemmTile::wgmma_tile(64, 8, true, 1, 1, 4)},
        MoeTileConfig{128, GemmTile::wgmma_tile(128, 4, false, 2, 1, 4),
                      GemmTile::wgmma_tile(128, 6, false, 2, 1, 8)},
        MoeTileConfig{64, GemmTile::wgmma_tile(256, 4, false, 1, 1, 2),
                      GemmTile::wgmma_tile(128, 6, false, 1, 1, 8)},
        MoeTileConfig{128, GemmTile::wgmma_tile(256, 3, false, 2, 1, 2),
                      GemmTile::wgmma_tile(128, 4, false, 2)}})
    CHECK(check_wgmma_variants_compile(engine, qwen, config) == 2);
  // bf16, normal orientation (both GEMMs stage their outputs through shared memory): the default
  // rule's tiles from 64 tokens an expert on.
  MoeShape qwen_bf16 = qwen;
  qwen_bf16.dtype = MoeDType::bf16;
  for (const MoeTileConfig& config : {MoeTileConfig{64, GemmTile::wgmma_tile(256, 4, false, 1),
                                                    GemmTile::wgmma_tile(256, 4, false, 1)},
                                      MoeTileConfig{128, GemmTile::wgmma_tile(256, 4, false, 2),
                                                    GemmTile::wgmma_tile(256, 4, false, 2)}})
    CHECK(check_wgmma_variants_compile(engine, qwen_bf16, config) == 2);
}

TEST_CASE("stream-K variants compile for sm_90a without spills or serialized wgmma") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  // Both GEMMs, FP8 (GEMM1: f16 MMAs with register A; GEMM2: e4m3 promoted per stage) and bf16,
  // blocks of 8 and 32 tokens (narrower MMAs for partly filled blocks at every width).
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral_bf16{8, 2, 4096, 14336, MoeDType::bf16};
  for (const auto& [shape, config] :
       {std::pair{qwen, MoeTileConfig{8, stream_k_tile(128, 6), stream_k_tile(64, 6)}},
        std::pair{qwen, MoeTileConfig{32, stream_k_tile(128, 4), stream_k_tile(64, 4)}},
        std::pair{mixtral_bf16, MoeTileConfig{16, stream_k_tile(128, 4), stream_k_tile(64, 6)}},
        std::pair{qwen, MoeTileConfig{64, dynamic_tile(128, 4), dynamic_tile(64, 6)}},
        std::pair{mixtral_bf16, MoeTileConfig{8, dynamic_tile(128, 6), dynamic_tile(64, 4)}}})
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
}

TEST_CASE("GEMM1 on e4m3 tensor cores compiles for sm_90a without spills or serialized wgmma, "
          "and only for FP8 GEMM1 tiles that hold its registers") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
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
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};
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
  const DeviceFacts h200 = DeviceFacts::for_target(Arch{9, 0, true}, "NVIDIA H200");
  TunedMoeOptions exact;
  exact.accumulation = MoeAccumulation::exact;
  int compiled = 0, fewer_stages = 0;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries)
    for (const MoeConfigBucket& bucket : entry.buckets) {
      const MoeTileConfig& table = bucket.config;
      if (!table.gemm1.e4m3 && !table.gemm2.whole_k)
        continue; // exact runs the table's own tiles, compiled by the manifests' test
      auto plan =
          moe_detail::plan_fused_moe(entry.shape, bucket.max_tokens, h200, exact, entry.weights);
      REQUIRE_MESSAGE(static_cast<bool>(plan), llvm::toString(plan.takeError()));
      INFO(table.describe() << " -> " << plan->config.describe());
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
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
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

TEST_CASE("the workspace holds the f16 copy of the tokens for FP8 shapes, after the scratch: a "
          "row a token, or (top_k <= 2) a row a padded slot") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  MoeShape bf16 = qwen;
  bf16.dtype = MoeDType::bf16;
  for (int64_t tokens : {1, 1024, 4096}) {
    const MoeWorkspaceLayout fp8 = moe_workspace_layout(qwen, tokens);
    CHECK(fp8.tokens_f16 % 256 == 0);
    CHECK(fp8.tokens_f16 >= fp8.stream_k + moe_detail::k_stream_k_scratch_bytes);
    CHECK(fp8.tokens_f16_rows == tokens);
    CHECK(fp8.tokens_f16 + static_cast<size_t>(tokens * qwen.hidden * 2) <= fp8.bytes);
    // Sorted: every slot and the padding of blocks of up to 128 (each expert's last block).
    const MoeWorkspaceLayout sorted = moe_workspace_layout(mixtral, tokens);
    const int64_t rows = tokens * 2 + std::min<int64_t>(8, tokens * 2) * 127;
    CHECK(sorted.tokens_f16_rows == rows);
    CHECK(sorted.tokens_f16 + static_cast<size_t>(rows * mixtral.hidden * 2) <= sorted.bytes);
    // bf16 tiles never read an f16 copy: no region for it, the scratch ends the workspace.
    const MoeWorkspaceLayout b = moe_workspace_layout(bf16, tokens);
    CHECK(b.tokens_f16 == 0);
    CHECK(b.bytes == (b.stream_k + moe_detail::k_stream_k_scratch_bytes + 255) / 256 * 256);
  }
}

TEST_CASE("the block hand-off's target: GEMM1's tiles a block times its epilogue warps, when "
          "wanted and safe") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const GemmTile normal2 = GemmTile::wgmma_tile(256, 3, false, 2); // 6 tiles, 8 warps each
  const GemmTile swap2 = GemmTile::wgmma_tile(128, 4, true, 2);    // 12 tiles, 4 warps (K split)
  const GemmTile packed = GemmTile::wgmma_tile(64, 4, true, 1);    // 24 tiles, 4 warps
  const GemmTile gemm2 = GemmTile::wgmma_tile(128, 4, false, 2);
  TunedMoeOptions automatic, always, never;
  always.handoff = MoeHandoff::always;
  never.handoff = MoeHandoff::never;
  auto target = [&](const MoeShape& s, int64_t tokens, const MoeTileConfig& c,
                    const TunedMoeOptions& o, int64_t blocks = 100) {
    return moe_detail::handoff_target(s, tokens, c, o, blocks);
  };
  // Automatic: FP8 from 32 tokens an expert (Qwen3: T * 8 >= 32 * 128, T >= 512).
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, automatic) == 6 * 8);
  CHECK(target(qwen, 512, {128, swap2, gemm2}, automatic) == 12 * 4);
  CHECK(target(qwen, 511, {128, swap2, gemm2}, automatic) == 0);
  CHECK(target(qwen, 1, {8, packed, gemm2}, always) == 24 * 4);
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, never) == 0);
  MoeShape bf16 = qwen;
  bf16.dtype = MoeDType::bf16;
  CHECK(target(bf16, 4096, {128, normal2, gemm2}, automatic) == 0);
  CHECK(target(bf16, 4096, {128, normal2, gemm2}, always) == 6 * 8);
  // Only with both GEMMs in the call (GEMM2 zeroes what GEMM1 counts), both wgmma, a counter
  // for every block, and not both stream-K (their scratch slots would overlap in time).
  TunedMoeOptions gemm1_only = always;
  gemm1_only.stages = moe_stage_align | moe_stage_gemm1;
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, gemm1_only) == 0);
  TunedMoeOptions gemms_only = always;
  gemms_only.stages = moe_stage_gemm1 | moe_stage_gemm2;
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, gemms_only) == 6 * 8);
  const GemmTile mma{128, 2, 4, 3};
  CHECK(target(qwen, 1024, {128, mma, gemm2}, always) == 0);
  CHECK(target(qwen, 1024, {128, normal2, mma}, always) == 0);
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, always, 4096) == 6 * 8);
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, always, 4097) == 0);
  GemmTile sk1 = GemmTile::wgmma_tile(128, 4, true, 1), sk2 = GemmTile::wgmma_tile(64, 4, true, 1);
  sk1.schedule = sk2.schedule = MoeSchedule::stream_k;
  CHECK(target(qwen, 16, {16, sk1, sk2}, always) == 0);
  CHECK(target(qwen, 16, {16, sk1, GemmTile::wgmma_tile(64, 4, true, 1)}, always) == 12 * 4);
}

TEST_CASE("the FP8 wgmma GEMMs run block-major with the hand-off and few experts of one block "
          "each") {
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  // Mixtral T = 256: 512 routed tokens, 64 an expert, blocks of 128, the hand-off on:
  // block-major.
  CHECK(moe_detail::group_blocks(mixtral, 256, 128, true) == 1);
  CHECK(moe_detail::group_blocks(mixtral, 512, 128, true) == 1); // exactly one full block each
  CHECK(moe_detail::group_blocks(mixtral, 513, 128, true) == 8); // more: weight tiles to share
  CHECK(moe_detail::group_blocks(mixtral, 1024, 128, true) == 8);
  // Without the hand-off (Mixtral T <= 64, or turned off) nothing takes blocks early: grouped.
  CHECK(moe_detail::group_blocks(mixtral, 16, 8, false) == 8);
  CHECK(moe_detail::group_blocks(mixtral, 256, 128, false) == 8);
  // And the call decides it with the hand-off's own rule: on from 32 tokens an expert (FP8).
  const MoeTileConfig t256{128, GemmTile::wgmma_tile(256, 3, false, 2),
                           GemmTile::wgmma_tile(128, 4, false, 2)};
  const MoeTileConfig t16{8, GemmTile::wgmma_tile(64, 4, true, 1),
                          GemmTile::wgmma_tile(64, 6, true, 1)};
  const TunedMoeOptions automatic;
  CHECK(moe_detail::handoff_target(mixtral, 256, t256, automatic, 8) > 0);
  CHECK(moe_detail::handoff_target(mixtral, 16, t16, automatic, 9) == 0);
  // Many experts: groups of 8 blocks already complete one after another.
  CHECK(moe_detail::group_blocks(qwen, 1, 8, true) == 8);
  CHECK(moe_detail::group_blocks(qwen, 1024, 128, true) == 8);
  MoeShape sixteen = mixtral;
  sixteen.experts = 16;
  CHECK(moe_detail::group_blocks(sixteen, 256, 128, true) == 8);
  MoeShape bf16 = mixtral; // measured slower block-major
  bf16.dtype = MoeDType::bf16;
  CHECK(moe_detail::group_blocks(bf16, 256, 64, true) == 8);
  // Both divide the grid's block count, which wgmma_ctas rounds up to a multiple of 8.
  for (int64_t tokens : {1, 64, 256, 1024, 4096})
    for (bool handoff : {false, true})
      CHECK(8 % moe_detail::group_blocks(qwen, tokens, 64, handoff) == 0);
  // Forced (tests and benchmarks): either order anywhere.
  CHECK(moe_detail::group_blocks(mixtral, 256, 128, true, MoeLaunchOrder::grouped) == 8);
  CHECK(moe_detail::group_blocks(qwen, 4096, 128, false, MoeLaunchOrder::block_major) == 1);
  CHECK(moe_detail::group_blocks(bf16, 256, 64, false, MoeLaunchOrder::block_major) == 1);
}

TEST_CASE("more than 65535 token blocks: refused for mma.sync tiles only") {
  // 524288 tokens x top-2 over 8 experts in blocks of 16: 65543 blocks.
  const int64_t tokens = 524288;
  MoeArgs args(tokens);
  TempDir dir;
  Engine engine(test::config_in(dir));
  TunedMoeOptions options;
  options.config = MoeTileConfig{16, GemmTile{64, 1, 4, 4}, GemmTile{64, 1, 4, 4}};
  ErrorSummary mma = summarize(fused_moe(engine, args.shape, args.t, options, nullptr));
  INFO("mma message: " << mma.message);
  CHECK(mma.code == Errc::invalid_argument);
  CHECK(mma.message.find("blocks of 16 (at most 65535 with mma.sync tiles)") != std::string::npos);
  // The wgmma GEMMs' 1-D grid takes them; without a device the call fails later, elsewhere.
  options.config = MoeTileConfig{16, GemmTile::wgmma_tile(128, 4, true, 1),
                                 GemmTile::wgmma_tile(64, 4, true, 1)};
  ErrorSummary wgmma = summarize(fused_moe(engine, args.shape, args.t, options, nullptr));
  INFO("message: " << wgmma.message);
  CHECK(wgmma.message.find("blocks of") == std::string::npos);
  CHECK(wgmma.message.find("CTAs of") == std::string::npos);
}

TEST_CASE("a GEMM whose static plus dynamic shared memory passes 48 KiB asks for the opt-in") {
  // (32 + 64) rows x 128 bytes x 4 stages = 48 KiB exactly, plus 256 bytes of static indices.
  CHECK(moe_gemm_shared_bytes(32, GemmTile{64, 2, 2, 4}, MoeDType::fp8, 1) > 48u * 1024);
  CHECK(moe_gemm_shared_bytes(16, GemmTile{64, 1, 4, 4}, MoeDType::fp8, 1) == (16u + 64) * 128 * 4);
  CHECK(moe_gemm_shared_bytes(64, GemmTile{128, 2, 2, 4}, MoeDType::bf16, 2) ==
        (64u + 128) * 128 * 4);
}
