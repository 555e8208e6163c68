// fused_moe without a GPU: its special variants (split-K, multi-tile, stream-K, the stable
// grouping) compile for sm_90a with zero spills and no wgmma serialization diagnostic (ptxas
// C7515) through the engine's prepare, and the op validates its arguments on the host before
// anything touches a device. FP8 accumulation on e4m3 tensor cores: fused_moe_e4m3_compile_test;
// tile rules and tables: config_test; packed weights: fused_moe_packed_test; the reference
// models' manifests: tests/deploy/example_manifests_test.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/detail.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"

#include "support/error.h"

#include <algorithm>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

// The reference shapes in FP8 (../shared/KERNELS.md).
const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};

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
  const MoeShape mixtral_bf16{8, 2, 4096, 14336, MoeDType::bf16};
  for (const auto& [shape, config] :
       {std::pair{qwen, MoeTileConfig{8, stream_k_tile(128, 6), stream_k_tile(64, 6)}},
        std::pair{qwen, MoeTileConfig{32, stream_k_tile(128, 4), stream_k_tile(64, 4)}},
        std::pair{mixtral_bf16, MoeTileConfig{16, stream_k_tile(128, 4), stream_k_tile(64, 6)}},
        std::pair{qwen, MoeTileConfig{64, dynamic_tile(128, 4), dynamic_tile(64, 6)}},
        std::pair{mixtral_bf16, MoeTileConfig{8, dynamic_tile(128, 6), dynamic_tile(64, 4)}}})
    CHECK(check_wgmma_variants_compile(engine, shape, config) == 2);
}

TEST_CASE("the workspace holds the f16 copy of the tokens for FP8 shapes, after the scratch: a "
          "row a token, or (top_k <= 2) a row a padded slot") {
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
