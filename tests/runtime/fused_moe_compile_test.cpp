// fused_moe without a GPU: every variant the three reference models' manifests derive
// (docs/examples/manifests) compiles for sm_90a with zero spills and no wgmma serialization
// diagnostic (ptxas C7515) through the engine's prepare,
// and the op validates its arguments on the host before anything touches a device.
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/manifest.h"
#include "runtime/ops/fused_moe.h"
#include "runtime/ops/moe_detail.h"
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <tuple>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using specjit::test::TempDir;

namespace {

std::vector<VariantRequest> manifest_requests(const std::string& name) {
  const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/examples/manifests/" + name;
  auto requests = parse_manifest(test::read_file(path), path);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return std::move(*requests);
}

void check_manifest_compiles(const std::string& name) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto requests = manifest_requests(name);
  CHECK(requests.size() >= 5);
  for (const VariantRequest& request : requests) {
    auto id = engine.add_kernel(request.def);
    REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
    auto variant = engine.prepare(*id, request.values);
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    INFO((*variant)->name_expression << ": " << (*variant)->registers << " registers");
    CHECK((*variant)->spill_bytes == 0);
    CHECK((*variant)->registers <= 255);
    // No serialized wgmma (C7515) or other coded wgmma diagnostic in any hot variant.
    for (const std::string& warning : (*variant)->warnings) {
      INFO("ptxas: " << warning);
      CHECK(warning.find("C75") == std::string::npos);
    }
  }
}

// Compiles the variants `config` derives for `shape` at T = 1 on weights in `layout`; checks every
// wgmma GEMM among them for spills and C75xx diagnostics and returns how many there were.
int check_wgmma_variants_compile(Engine& engine, const MoeShape& shape, const MoeTileConfig& config,
                                 MoeWeightLayout layout = MoeWeightLayout::row_major) {
  FusedMoeOptions options;
  options.config = config;
  auto requests = fused_moe_variants(shape, options, Arch{9, 0, true}, {1}, layout);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  int wgmma_variants = 0;
  for (const VariantRequest& request : *requests) {
    auto id = engine.add_kernel(request.def);
    REQUIRE(static_cast<bool>(id));
    auto variant = engine.prepare(*id, request.values);
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    if ((*variant)->name_expression.find("moe_wgmma") == std::string::npos)
      continue;
    ++wgmma_variants;
    INFO((*variant)->name_expression << ": " << (*variant)->registers << " registers");
    CHECK((*variant)->spill_bytes == 0);
    for (const std::string& warning : (*variant)->warnings)
      CHECK(warning.find("C75") == std::string::npos);
    const GemmTile& tile = (*variant)->name_expression.find("moe_wgmma1") != std::string::npos
                               ? config.gemm1
                               : config.gemm2;
    // The template values tiles (stream-K 0, dynamic 1024) and weights (row-major 0, packed: bulk
    // copies 1, the rank-4 map 2; a tile that names neither reads by bulk copies when it is
    // swap-AB with e4m3 tokens), then num_tokens.
    const bool bulk = tile.packed_reads == MoePackedReads::automatic
                          ? tile.swap_ab && !tile.f16_tokens
                          : tile.packed_reads == MoePackedReads::bulk;
    const int weights = layout == MoeWeightLayout::row_major ? 0 : bulk ? 1 : 2;
    const std::string tail = fmt::format(", {}, 0LL>", weights);
    CHECK((*variant)->name_expression.find(tail) != std::string::npos);
    if (tile.stream_k())
      CHECK((*variant)->name_expression.find(", 0" + tail) != std::string::npos);
    if (tile.dynamic())
      CHECK((*variant)->name_expression.find(", 1024" + tail) != std::string::npos);
  }
  return wgmma_variants;
}

constexpr CUdeviceptr k_base = 0x7f0000000000ull;

struct Args {
  MoeShape shape{8, 2, 256, 128, MoeDType::fp8};
  FusedMoeTensors t;
  explicit Args(int64_t tokens) {
    const MoeShape& s = shape;
    t.hidden = {k_base, DType::e4m3, {tokens, s.hidden}, {}};
    t.router_logits = {k_base + 0x1000000, DType::f32, {tokens, s.experts}, {}};
    t.w13 = {k_base + 0x2000000, DType::e4m3, {s.experts, 2 * s.intermediate, s.hidden}, {}};
    t.w2 = {k_base + 0x3000000, DType::e4m3, {s.experts, s.hidden, s.intermediate}, {}};
    t.a1_scale = {k_base + 0x4000000, DType::f32, {1}, {}};
    t.w13_scale = {k_base + 0x4001000, DType::f32, {s.experts}, {}};
    t.a2_scale = {k_base + 0x4002000, DType::f32, {1}, {}};
    t.w2_scale = {k_base + 0x4003000, DType::f32, {s.experts}, {}};
    t.out = {k_base + 0x5000000, DType::bf16, {tokens, s.hidden}, {}};
    t.workspace = {k_base + 0x6000000,
                   DType::u8,
                   {static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes)},
                   {}};
  }
};

// Checks that `err` is an invalid_argument error whose message holds `part` (begins with it when
// `at_start`), showing the message when not.
void check_invalid_argument(llvm::Error err, const std::string& part, bool at_start = false) {
  ErrorSummary error = summarize(std::move(err));
  INFO("message: " << error.message);
  CHECK(error.code == Errc::invalid_argument);
  if (at_start)
    CHECK(error.message.rfind(part, 0) == 0);
  else
    CHECK(error.message.find(part) != std::string::npos);
}

void check_rejected(const Args& args, const std::string& fragment) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  check_invalid_argument(fused_moe(engine, args.shape, args.t, {}, nullptr), fragment);
  CHECK(engine.stats().requests == 0);
}

// The table's JSON text (what `specjit-bench moe --tune` writes), after checking that it
// parses back to every entry's bucket configurations.
std::string round_trip_json(const MoeConfigTable& table) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << moe_config_table_to_json(table);
  os.flush();
  auto again = parse_moe_config_table(text);
  REQUIRE_MESSAGE(static_cast<bool>(again), llvm::toString(again.takeError()));
  REQUIRE(again->entries.size() == table.entries.size());
  for (size_t e = 0; e < table.entries.size(); ++e) {
    CHECK(again->entries[e].weights == table.entries[e].weights);
    REQUIRE(again->entries[e].buckets.size() == table.entries[e].buckets.size());
    for (size_t b = 0; b < table.entries[e].buckets.size(); ++b)
      CHECK(again->entries[e].buckets[b].config == table.entries[e].buckets[b].config);
  }
  return text;
}

// The message parse_moe_config_table refuses `text` with, its first `from` replaced by `to`
// (checked to be refused: empty otherwise).
std::string table_error(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  auto table = parse_moe_config_table(text);
  CHECK_FALSE(static_cast<bool>(table));
  return table ? std::string() : summarize(table.takeError()).message;
}

} // namespace

TEST_CASE("every variant of the Qwen3-30B-A3B manifest compiles for sm_90a without spills") {
  check_manifest_compiles("qwen3-30b-a3b.json");
}

TEST_CASE("every variant of the Mixtral-8x7B manifest compiles for sm_90a without spills") {
  check_manifest_compiles("mixtral-8x7b.json");
}

TEST_CASE("every variant of the DeepSeek-V3 TP8 manifest compiles for sm_90a without spills") {
  check_manifest_compiles("deepseek-v3-tp8.json");
}

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
  FusedMoeOptions options;
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
    Args a(4);
    a.t.hidden.dtype = DType::bf16;
    check_rejected(a, "hidden: expected e4m3[*, 256], got bf16[4, 256]");
  }
  SUBCASE("w13 shape") {
    Args a(4);
    a.t.w13.shape = {8, 128, 256};
    check_rejected(a, "w13: expected e4m3[8, 256, 256]");
  }
  SUBCASE("w2 transposed") {
    Args a(4);
    a.t.w2.shape = {8, 128, 256};
    check_rejected(a, "w2: expected e4m3[8, 256, 128]");
  }
  SUBCASE("router logits tokens") {
    Args a(4);
    a.t.router_logits.shape = {3, 8};
    check_rejected(a, "router_logits: expected f32[4, 8]");
  }
  SUBCASE("w13_scale per expert") {
    Args a(4);
    a.t.w13_scale.shape = {1};
    check_rejected(a, "w13_scale: expected f32[8]");
  }
  SUBCASE("out dtype") {
    Args a(4);
    a.t.out.dtype = DType::f32;
    check_rejected(a, "out: expected bf16[4, 256]");
  }
  SUBCASE("misaligned hidden") {
    Args a(4);
    a.t.hidden.data += 8;
    check_rejected(a, "hidden: data address");
  }
  SUBCASE("strided w2") {
    Args a(4);
    a.t.w2.strides = {256 * 128, 1, 256};
    check_rejected(a, "w2: expected a contiguous");
  }
  SUBCASE("small workspace") {
    Args a(4);
    a.t.workspace.shape = {1024};
    check_rejected(a, "workspace: needs at least");
  }
  SUBCASE("intermediate not a multiple of 128 bytes") {
    Args a(4);
    a.shape.intermediate = 100;
    check_rejected(a, "intermediate must be a positive multiple of 128");
  }
  SUBCASE("top_k above the expert count") {
    Args a(4);
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
  const TensorRef ids{k_base, DType::i32, {4, 2}, {}};
  // 8 slots over 8 experts in blocks of 16: up to 128 padded rows, 8 blocks.
  const TensorRef sorted{k_base + 0x10000, DType::i32, {128}, {}},
      experts{k_base + 0x20000, DType::i32, {7}, {}}, padded{k_base + 0x30000, DType::i32, {1}, {}};
  rejected(moe_align(engine, ids, 8, 16, sorted, experts, padded, false, nullptr),
           "moe_align: expert_ids: needs at least 8 elements, got i32[7]");
  rejected(moe_align(engine, ids, 8, 512, sorted, experts, padded, false, nullptr),
           "moe_align: block_m must be in [1, 256], got 512");
  rejected(moe_align(engine, ids, 1, 16, sorted, experts, padded, false, nullptr),
           "moe_align: top_k must be in [1, min(experts, 32)], got 2");
  const TensorRef logits{k_base, DType::bf16, {4, 8}, {}},
      weights{k_base + 0x10000, DType::f32, {4, 2}, {}};
  rejected(moe_route(engine, logits, weights, ids, true, nullptr), "moe_route: router_logits: ");
  CHECK(engine.stats().requests == 0);
}

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
  auto refused = [&](const MoeShape& shape, const MoeTileConfig& config) {
    return summarize(check_moe_config(shape, config, sm90a)).message;
  };
  MoeTileConfig bad = c;
  bad.gemm1.split_k = 3;
  CHECK(refused(qwen, bad).find("split_k must be 1, 2, 4 or 8") != std::string::npos);
  bad = c;
  bad.gemm2.split_k = 4; // GEMM2 K = 768: 6 stages do not split in 4
  CHECK(refused(qwen, bad).find("does not split into 4 parts") != std::string::npos);
  bad = c;
  bad.gemm2.warpgroups = 2; // DeepSeek GEMM2: one stage per CTA, two warpgroups want two
  CHECK(refused(deepseek, bad).find("at least 2 stages") != std::string::npos);
  bad = c;
  bad.gemm1 = GemmTile::wgmma_tile(128, 4, false, 2, 2);
  bad.block_m = 128;
  CHECK(refused(qwen, bad).find("split_k, stream_k and dynamic need the swap-AB orientation") !=
        std::string::npos);
  // The normal orientation takes several tiles per CTA (up to 64, any count that divides its
  // outputs' tiles: DeepSeek GEMM2's 56 tiles of 128 in CTAs of 14), whole tiles of its outputs.
  bad.gemm1 = GemmTile::wgmma_tile(128, 4, false, 2, 1, 4);  // 768 = 3 x 4 x 64
  bad.gemm2 = GemmTile::wgmma_tile(128, 4, false, 2, 1, 16); // 2048 = 16 x 128
  CHECK(!check_moe_config(qwen, bad, sm90a));
  CHECK(bad.describe() == "m128 g1[wgmma n128 g2 s4 t4] g2[wgmma n128 g2 s4 t16]");
  bad.gemm1.tiles = 8;
  CHECK(refused(qwen, bad).find("768 output columns are not a multiple of 8 tiles of 64") !=
        std::string::npos);
  bad.gemm1.tiles = 1;
  bad.gemm2.tiles = 32;
  CHECK(refused(qwen, bad).find("2048 output columns are not a multiple of 32 tiles of 128") !=
        std::string::npos);
  bad.gemm2.tiles = 65;
  CHECK(refused(qwen, bad).find("tiles must be 1 to 64") != std::string::npos);
  MoeTileConfig fourteen{128, GemmTile::wgmma_tile(256, 3, false, 2),
                         GemmTile::wgmma_tile(128, 4, false, 2, 1, 14)};
  CHECK(!check_moe_config(deepseek, fourteen, sm90a)); // 7168 = 14 x 4 x 128
  fourteen.gemm2.tiles = 16;
  CHECK(refused(deepseek, fourteen).find("not a multiple of 16 tiles") != std::string::npos);
  bad = c;
  bad.block_m = 64; // 7 x 2 x 64 x 64 x 4 bytes of partials > 3 stages of 192 rows
  bad.gemm1 = GemmTile::wgmma_tile(128, 3, true, 1, 8);
  CHECK(refused(qwen, bad).find("partial sums") != std::string::npos);
  bad = c;
  bad.gemm2.tiles = 4;
  CHECK(refused(qwen, bad).find("several tiles per CTA need") != std::string::npos); // + split_k
  bad.gemm2.split_k = 1;
  CHECK(!check_moe_config(qwen, bad, sm90a));
  CHECK(bad.gemm2.describe() == "wgmma-swap n64 g1 s8 t4");
  bad.gemm2.warpgroups = 2;
  CHECK(refused(qwen, bad).find("several tiles per CTA need one warpgroup") != std::string::npos);
  bad = c;
  bad.gemm1.tiles = 8;
  bad.gemm1.split_k = 1; // 768 outputs: 12 tiles of 64, not whole 8s
  CHECK(refused(qwen, bad).find("not a multiple of 8 tiles") != std::string::npos);
  // The table keeps split_k (and leaves it out when it is 1).
  MoeConfigTable table;
  table.entries.push_back({qwen, sm90a, {{1, c}}});
  CHECK(round_trip_json(table).find("\"split_k\":4") != std::string::npos);
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

namespace {
GemmTile stream_k_tile(int block_n, int stages) {
  GemmTile t = GemmTile::wgmma_tile(block_n, stages, true, 1);
  t.schedule = MoeSchedule::stream_k;
  return t;
}
GemmTile dynamic_tile(int block_n, int stages) {
  GemmTile t = GemmTile::wgmma_tile(block_n, stages, true, 1);
  t.schedule = MoeSchedule::dynamic;
  return t;
}
} // namespace

TEST_CASE("stream-K tiles: swap-AB, one warpgroup, unpacked, blocks of up to 32; kept by the "
          "table's JSON") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  auto refused = [&](const MoeShape& s, const MoeTileConfig& c) {
    return summarize(check_moe_config(s, c, sm90a)).message;
  };
  const MoeTileConfig c{32, stream_k_tile(128, 4), stream_k_tile(64, 6)};
  CHECK(refused(qwen, c).empty());
  CHECK(c.gemm1.describe() == "wgmma-swap n128 g1 s4 sk");
  MoeTileConfig bad = c;
  bad.block_m = 64;
  CHECK(refused(qwen, bad).find("stream_k needs block_m <= 32") != std::string::npos);
  bad = c;
  bad.gemm1.block_n = 64; // packed GEMM1
  CHECK(refused(qwen, bad).find("stream_k needs one warpgroup, no split_k, one tile and an "
                                "unpacked tile") != std::string::npos);
  bad = c;
  bad.gemm2.warpgroups = 2;
  CHECK(refused(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = c;
  bad.gemm2.tiles = 2;
  CHECK(refused(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = c;
  bad.gemm2.split_k = 2;
  CHECK(refused(qwen, bad).find("stream_k needs one warpgroup") != std::string::npos);
  bad = MoeTileConfig{128, GemmTile::wgmma_tile(128, 4, false, 2), c.gemm2};
  bad.gemm1.schedule = MoeSchedule::stream_k;
  CHECK(refused(qwen, bad).find("split_k, stream_k and dynamic need the swap-AB orientation") !=
        std::string::npos);
  bad = MoeTileConfig{16, GemmTile{64, 1, 4, 4}, GemmTile{64, 1, 4, 4}};
  bad.gemm2.schedule = MoeSchedule::stream_k;
  CHECK(refused(qwen, bad).find("stream_k, dynamic, f16_tokens and reads need a wgmma tile") !=
        std::string::npos);
  // The table keeps stream_k (and leaves it out when false); a non-boolean is named.
  MoeConfigTable table;
  table.entries.push_back({qwen, sm90a, {{64, c}}});
  std::string text = round_trip_json(table);
  CHECK(text.find("\"stream_k\":true") != std::string::npos);
  // The dynamic schedule: the same rules but any block size (not both schedules at once: the
  // JSON check below).
  const MoeTileConfig d{64, dynamic_tile(128, 4), dynamic_tile(64, 6)};
  CHECK(refused(qwen, d).empty());
  CHECK(d.gemm2.describe() == "wgmma-swap n64 g1 s6 dyn");
  bad = d;
  bad.gemm1.block_n = 64;
  CHECK(refused(qwen, bad).find("dynamic needs one warpgroup") != std::string::npos);
  table.entries[0].buckets.push_back({256, d});
  CHECK(round_trip_json(table).find("\"dynamic\":true") != std::string::npos);
  CHECK(table_error(text, "\"stream_k\":true", "\"stream_k\":1")
            .find("'stream_k' must be a boolean") != std::string::npos);
  CHECK(table_error(text, "\"stream_k\":true", "\"stream_k\":true,\"dynamic\":true")
            .find("stream_k and dynamic are two schedules: pick one") != std::string::npos);
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

namespace {
GemmTile f16_tokens_tile(int warpgroups, int stages, int tiles = 1,
                         MoeSchedule schedule = MoeSchedule::fixed) {
  GemmTile t = GemmTile::wgmma_tile(128 * warpgroups, stages, true, warpgroups, 1, tiles);
  t.f16_tokens = true;
  t.schedule = schedule;
  return t;
}
} // namespace

TEST_CASE("f16-token GEMM1 tiles: FP8 swap-AB, 64 output columns a warpgroup, fixed or dynamic "
          "schedule; kept by the JSON, their variants compile without spills or serialized "
          "wgmma") {
  const MoeShape qwen{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  auto refused = [&](const MoeShape& s, const MoeTileConfig& c) {
    return summarize(check_moe_config(s, c, sm90a)).message;
  };
  const GemmTile gemm2 = GemmTile::wgmma_tile(128, 4, false, 2);
  const MoeTileConfig c{128, f16_tokens_tile(2, 3), gemm2};
  CHECK(refused(qwen, c).empty());
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
  CHECK(refused(qwen, bad).find("f16_tokens needs block_n = 128 x warpgroups = 256") !=
        std::string::npos);
  bad = c;
  bad.gemm1.swap_ab = false;
  CHECK(refused(qwen, bad).find("f16_tokens needs swap_ab") != std::string::npos);
  bad = c;
  bad.gemm1.split_k = 2;
  CHECK(refused(qwen, bad).find("f16_tokens needs no split_k and the fixed or dynamic schedule") !=
        std::string::npos);
  bad = c;
  bad.gemm1.schedule = MoeSchedule::stream_k;
  CHECK(refused(qwen, bad).find("f16_tokens needs no split_k and the fixed or dynamic schedule") !=
        std::string::npos);
  // The dynamic schedule: one tile at a time from its counter.
  bad = c;
  bad.gemm1.schedule = MoeSchedule::dynamic;
  CHECK(refused(qwen, bad).empty());
  CHECK(bad.gemm1.describe() == "wgmma-swap n256 g2 s3 dyn f16");
  bad.gemm1.tiles = 3;
  CHECK(refused(qwen, bad).find("f16_tokens with the dynamic schedule needs tiles 1") !=
        std::string::npos);
  bad = c;
  bad.gemm1.tiles = 4; // 6 tiles of 128 columns
  CHECK(refused(qwen, bad).find("f16_tokens: 768 output columns are not a multiple of 4 tiles "
                                "of 128") != std::string::npos);
  bad.gemm1.tiles = 3;
  CHECK(refused(qwen, bad).empty());
  bad = MoeTileConfig{256, f16_tokens_tile(1, 3), gemm2};
  bad.gemm2 = GemmTile::wgmma_tile(64, 4, true, 1);
  CHECK(refused(qwen, bad).find("f16_tokens needs block_m in 8, 16, 32, 64, 128") !=
        std::string::npos);
  MoeShape bf16 = qwen;
  bf16.dtype = MoeDType::bf16;
  CHECK(refused(bf16, {64, f16_tokens_tile(1, 4), GemmTile::wgmma_tile(64, 4, true, 1)})
            .find("f16_tokens is for FP8 GEMM1") != std::string::npos);
  // The hand-off counts every warpgroup's epilogue warps: they own different columns.
  FusedMoeOptions always;
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
  FusedMoeOptions options;
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
  FusedMoeOptions automatic, always, never;
  always.handoff = MoeHandoff::always;
  never.handoff = MoeHandoff::never;
  auto target = [&](const MoeShape& s, int64_t tokens, const MoeTileConfig& c,
                    const FusedMoeOptions& o, int64_t blocks = 100) {
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
  FusedMoeOptions gemm1_only = always;
  gemm1_only.stages = moe_stage_align | moe_stage_gemm1;
  CHECK(target(qwen, 1024, {128, normal2, gemm2}, gemm1_only) == 0);
  FusedMoeOptions gemms_only = always;
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
  const FusedMoeOptions automatic;
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
  Args args(tokens);
  TempDir dir;
  Engine engine(test::config_in(dir));
  FusedMoeOptions options;
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

TEST_CASE("the H200 table in docs parses and covers the three FP8 reference shapes") {
  const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/moe-configs-h200.json";
  auto table = parse_moe_config_table(test::read_file(path));
  REQUIRE_MESSAGE(static_cast<bool>(table), llvm::toString(table.takeError()));
  for (MoeShape shape :
       {MoeShape{128, 8, 2048, 768, MoeDType::fp8}, MoeShape{8, 2, 4096, 14336, MoeDType::fp8},
        MoeShape{256, 8, 7168, 256, MoeDType::fp8}}) {
    const MoeConfigEntry* entry = table->find(shape, Arch{9, 0, true});
    REQUIRE(entry != nullptr);
    CHECK(entry->buckets.back().max_tokens == 4096);
  }
}

TEST_CASE("the H200 table's packed entries compile clean, as variants of their own") {
  const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/moe-configs-h200.json";
  auto table = parse_moe_config_table(test::read_file(path));
  REQUIRE_MESSAGE(static_cast<bool>(table), llvm::toString(table.takeError()));
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

TEST_CASE("a GEMM whose static plus dynamic shared memory passes 48 KiB asks for the opt-in") {
  // (32 + 64) rows x 128 bytes x 4 stages = 48 KiB exactly, plus 256 bytes of static indices.
  CHECK(moe_gemm_shared_bytes(32, GemmTile{64, 2, 2, 4}, MoeDType::fp8, 1) > 48u * 1024);
  CHECK(moe_gemm_shared_bytes(16, GemmTile{64, 1, 4, 4}, MoeDType::fp8, 1) == (16u + 64) * 128 * 4);
  CHECK(moe_gemm_shared_bytes(64, GemmTile{128, 2, 2, 4}, MoeDType::bf16, 2) ==
        (64u + 128) * 128 * 4);
}

TEST_CASE("packed weights: 32-row pieces of 128 bytes, each in the 128-byte swizzle's order") {
  // Three row groups of rows of 384 bytes (3 pieces a group).
  const int64_t k_bytes = 384, rows = 96;
  std::vector<int64_t> seen(rows * k_bytes, 0);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t k = 0; k < k_bytes; ++k) {
      const int64_t at = moe_packed_weight_offset(row, k, k_bytes);
      REQUIRE(at >= 0);
      REQUIRE(at < rows * k_bytes);
      ++seen[at];
    }
  CHECK(std::count(seen.begin(), seen.end(), 1) == rows * k_bytes); // a permutation
  // Piece (row group g, k piece p) is the 4096 bytes at (g * 3 + p) * 4096; in it, row r's
  // 16-byte chunk c lies at chunk c ^ (r % 8) of the row's 128 bytes, its bytes in order.
  for (int64_t row : {0, 5, 33, 95})
    for (int64_t k : {0, 17, 130, 383}) {
      const int64_t g = row / 32, r = row % 32, p = k / 128, c = k % 128 / 16;
      CHECK(moe_packed_weight_offset(row, k, k_bytes) ==
            (g * 3 + p) * 4096 + r * 128 + (c ^ (r % 8)) * 16 + k % 16);
    }
}

TEST_CASE("moe_pack_weights and fused_moe name what packed weights cannot be") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  const TensorRef w{k_base, DType::e4m3, {8, 256, 256}, {}};
  const TensorRef packed{k_base + 0x100000, DType::e4m3, {8, 256, 256}, {}};
  check_invalid_argument(
      moe_pack_weights(engine, {k_base, DType::f32, {8, 256, 256}, {}}, packed, nullptr),
      "moe_pack_weights: weights must be e4m3 or bf16");
  check_invalid_argument(
      moe_pack_weights(engine, w, {k_base + 0x100000, DType::e4m3, {8, 256, 128}, {}}, nullptr),
      "moe_pack_weights: packed: expected e4m3[8, 256, 256]");
  check_invalid_argument(
      moe_pack_weights(engine, w, {k_base + 0x1000, DType::e4m3, {8, 256, 256}, {}}, nullptr),
      "must not overlap");
  check_invalid_argument(moe_pack_weights(engine, {k_base, DType::e4m3, {8, 48, 256}, {}},
                                          {k_base + 0x100000, DType::e4m3, {8, 48, 256}, {}},
                                          nullptr),
                         "a multiple of 32 rows per expert");
  check_invalid_argument(moe_pack_weights(engine, {k_base, DType::e4m3, {8, 256, 64}, {}},
                                          {k_base + 0x100000, DType::e4m3, {8, 256, 64}, {}},
                                          nullptr),
                         "rows of a multiple of 128 bytes");
  CHECK(engine.stats().requests == 0);
  // Only wgmma tiles read packed weights.
  Args a(4);
  a.t.weight_layout = MoeWeightLayout::packed;
  FusedMoeOptions options;
  options.config = MoeTileConfig{16, GemmTile{64, 1, 4, 4}, GemmTile{64, 1, 4, 4}};
  check_invalid_argument(fused_moe(engine, a.shape, a.t, options, nullptr),
                         "packed weights are read by wgmma tiles");
}

TEST_CASE("the pack kernel compiles for sm_90a without spills") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto id = engine.add_kernel(moe_pack_weights_kernel());
  REQUIRE(static_cast<bool>(id));
  auto variant = engine.prepare(*id, {4096});
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  CHECK((*variant)->spill_bytes == 0);
}

TEST_CASE("the packed weights' tensor map checks for whole pieces before the driver") {
  for (auto [rows, k_bytes, box] : {std::tuple<uint64_t, uint64_t, uint32_t>{100, 256, 64},
                                    {128, 200, 64},
                                    {128, 256, 48},
                                    {128, 256, 512}}) {
    auto map = tensor_map_packed_weights(k_base, rows, k_bytes, k_moe_piece_rows, box);
    REQUIRE(!map);
    CHECK(summarize(map.takeError()).message.find("not whole pieces") != std::string::npos);
  }
}

TEST_CASE(
    "a table's packed entry serves packed weights; row-major ones fall back to nothing else") {
  const MoeShape shape{128, 8, 2048, 768, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  auto entry_with = [&](int stages, MoeWeightLayout weights) {
    MoeConfigEntry entry{shape, sm90a, {}, weights};
    MoeTileConfig c;
    c.block_m = 8;
    c.gemm1 = GemmTile::wgmma_tile(128, stages, true, 1);
    c.gemm2 = GemmTile::wgmma_tile(64, 4, true, 1);
    entry.buckets.push_back({16, c});
    return entry;
  };
  MoeConfigTable packed_only;
  packed_only.entries.push_back(entry_with(6, MoeWeightLayout::packed));
  // Row-major weights never take a packed entry: the default rule.
  auto rule = resolve_moe_config(shape, 4, sm90a, &packed_only);
  REQUIRE(static_cast<bool>(rule));
  CHECK(rule->bounds == default_moe_buckets());
  auto packed = resolve_moe_config(shape, 4, sm90a, &packed_only, MoeWeightLayout::packed);
  REQUIRE(static_cast<bool>(packed));
  CHECK(packed->config.gemm1.stages == 6);
  // With both, each layout its own; packed weights without an entry take the row-major one.
  MoeConfigTable both = packed_only;
  both.entries.insert(both.entries.begin(), entry_with(3, MoeWeightLayout::row_major));
  CHECK(resolve_moe_config(shape, 4, sm90a, &both)->config.gemm1.stages == 3);
  CHECK(resolve_moe_config(shape, 4, sm90a, &both, MoeWeightLayout::packed)->config.gemm1.stages ==
        6);
  MoeConfigTable row_major_only;
  row_major_only.entries.push_back(entry_with(3, MoeWeightLayout::row_major));
  CHECK(resolve_moe_config(shape, 4, sm90a, &row_major_only, MoeWeightLayout::packed)
            ->config.gemm1.stages == 3);
  // The variants follow the layout's entry.
  FusedMoeOptions options;
  options.table = &both;
  for (auto [weights, stages] :
       {std::pair{MoeWeightLayout::row_major, 3}, std::pair{MoeWeightLayout::packed, 6}}) {
    auto requests = fused_moe_variants(shape, options, sm90a, {4}, weights);
    REQUIRE(static_cast<bool>(requests));
    int gemm1 = 0;
    for (const VariantRequest& r : *requests)
      if (r.def.id == "moe_wgmma1_fp8") {
        ++gemm1;
        CHECK(r.values[6] == stages); // n, k, swap_ab, block_m, block_n, warpgroups, stages
      }
    CHECK(gemm1 == 1);
  }
  // JSON: "weights" only on packed entries, and read back; anything else is named.
  const std::string text = round_trip_json(both);
  CHECK(text.find("\"weights\":\"packed\"") != std::string::npos);
  CHECK(text.find("row_major") == std::string::npos);
  CHECK(table_error(text, "\"packed\"", "\"tiled\"").find("weights must be row_major or packed") !=
        std::string::npos);
}

TEST_CASE("packed weights are read as the call says, else as the table's tile says, else by the "
          "rule; the table's \"reads\" is for packed entries only") {
  using moe_detail::weight_reads;
  const MoeShape shape{128, 8, 2048, 768, MoeDType::fp8};
  const Arch sm90a{9, 0, true};
  GemmTile swap = GemmTile::wgmma_tile(128, 4, true, 1), normal = swap;
  normal.swap_ab = false;
  const auto packed = MoeWeightLayout::packed, row_major = MoeWeightLayout::row_major;
  const auto automatic = MoePackedReads::automatic, bulk = MoePackedReads::bulk,
             map = MoePackedReads::tensor_map;
  // The rule: bulk copies for swap-AB tiles without f16 tokens, the map elsewhere.
  CHECK(weight_reads(swap, packed, automatic) == 1);
  CHECK(weight_reads(normal, packed, automatic) == 2);
  CHECK(weight_reads(swap, row_major, bulk) == 0); // row-major weights: always the rank-3 map
  // The tile's own choice (a table's), and the call's over it.
  GemmTile swap_map = swap, normal_bulk = normal;
  swap_map.packed_reads = map;
  normal_bulk.packed_reads = bulk;
  CHECK(weight_reads(swap_map, packed, automatic) == 2);
  CHECK(weight_reads(normal_bulk, packed, automatic) == 1);
  CHECK(weight_reads(swap_map, packed, bulk) == 1);
  CHECK(weight_reads(swap_map, row_major, automatic) == 0);
  CHECK(swap_map.describe() == "wgmma-swap n128 g1 s4 map");
  CHECK(normal_bulk.describe() == "wgmma n128 g1 s4 bulk");
  // The variants: template value weights (after tiles) follows the tile's reads.
  MoeConfigEntry entry{shape, sm90a, {}, packed};
  entry.buckets.push_back({16, MoeTileConfig{8, swap_map, GemmTile::wgmma_tile(64, 4, true, 1)}});
  MoeConfigTable table;
  table.entries.push_back(entry);
  FusedMoeOptions options;
  options.table = &table;
  auto requests = fused_moe_variants(shape, options, sm90a, {4}, packed);
  REQUIRE(static_cast<bool>(requests));
  int gemms = 0;
  for (const VariantRequest& r : *requests)
    if (r.def.id == "moe_wgmma1_fp8" || r.def.id == "moe_wgmma2_fp8") {
      ++gemms;
      CHECK(r.values[9] == (r.def.id == "moe_wgmma1_fp8" ? 2 : 1));
    }
  CHECK(gemms == 2);
  // JSON: "reads" written where a tile names it, read back the same.
  const std::string text = round_trip_json(table);
  CHECK(text.find("\"reads\":\"map\"") != std::string::npos);
  // Anything but "bulk" or "map" is named, and so is "reads" in a row-major entry.
  CHECK(table_error(text, "\"map\"", "\"dma\"").find("reads must be \"bulk\" or \"map\"") !=
        std::string::npos);
  CHECK(table_error(text, "\"weights\":\"packed\"", "\"weights\":\"row_major\"")
            .find("reads is for the tiles of a packed entry") != std::string::npos);
  // An mma.sync tile names none.
  MoeTileConfig mma{16, {64, 1, 4, 4}, {64, 1, 4, 4}};
  mma.gemm1.packed_reads = bulk;
  auto err = check_moe_config(shape, mma, sm90a);
  REQUIRE(static_cast<bool>(err));
  CHECK(llvm::toString(std::move(err)).find("reads need a wgmma tile") != std::string::npos);
}
