// Packed weights without a GPU (moe_pack_weights, MoeWeightLayout::packed): the packed layout's
// offsets, what packed weights cannot be, the pack kernel's and the packed tensor map's checks,
// the table's packed entries and per-tile reads, and which read mode a GEMM takes.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/detail.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

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
  const TensorRef w{k_fake_base, DType::e4m3, {8, 256, 256}, {}};
  const TensorRef packed{k_fake_base + 0x100000, DType::e4m3, {8, 256, 256}, {}};
  check_invalid_argument(
      moe_pack_weights(engine, {k_fake_base, DType::f32, {8, 256, 256}, {}}, packed, nullptr),
      "moe_pack_weights: weights must be e4m3 or bf16");
  check_invalid_argument(moe_pack_weights(engine, w,
                                          {k_fake_base + 0x100000, DType::e4m3, {8, 256, 128}, {}},
                                          nullptr),
                         "moe_pack_weights: packed: expected e4m3[8, 256, 256]");
  check_invalid_argument(
      moe_pack_weights(engine, w, {k_fake_base + 0x1000, DType::e4m3, {8, 256, 256}, {}}, nullptr),
      "must not overlap");
  check_invalid_argument(moe_pack_weights(engine, {k_fake_base, DType::e4m3, {8, 48, 256}, {}},
                                          {k_fake_base + 0x100000, DType::e4m3, {8, 48, 256}, {}},
                                          nullptr),
                         "a multiple of 32 rows per expert");
  check_invalid_argument(moe_pack_weights(engine, {k_fake_base, DType::e4m3, {8, 256, 64}, {}},
                                          {k_fake_base + 0x100000, DType::e4m3, {8, 256, 64}, {}},
                                          nullptr),
                         "rows of a multiple of 128 bytes");
  CHECK(engine.stats().requests == 0);
  // Only wgmma tiles read packed weights.
  MoeArgs a(4);
  a.t.weight_layout = MoeWeightLayout::packed;
  TunedMoeOptions options;
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
    auto map = tensor_map_packed_weights(k_fake_base, rows, k_bytes, k_moe_piece_rows, box);
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
  TunedMoeOptions options;
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
  using W = specjit_kernels::MoeWeightReads;
  CHECK(weight_reads(swap, packed, automatic) == W::packed_bulk);
  CHECK(weight_reads(normal, packed, automatic) == W::packed_map);
  GemmTile swap_f16 = swap;
  swap_f16.f16_tokens = true;
  CHECK(weight_reads(swap_f16, packed, automatic) == W::packed_map);
  // Row-major weights: always the rank-3 map.
  CHECK(weight_reads(swap, row_major, bulk) == W::row_major_map);
  // The tile's own choice (a table's), and the call's over it.
  GemmTile swap_map = swap, normal_bulk = normal;
  swap_map.packed_reads = map;
  normal_bulk.packed_reads = bulk;
  CHECK(weight_reads(swap_map, packed, automatic) == W::packed_map);
  CHECK(weight_reads(normal_bulk, packed, automatic) == W::packed_bulk);
  CHECK(weight_reads(swap_map, packed, bulk) == W::packed_bulk);
  CHECK(weight_reads(swap_map, row_major, automatic) == W::row_major_map);
  CHECK(swap_map.describe() == "wgmma-swap n128 g1 s4 map");
  CHECK(normal_bulk.describe() == "wgmma n128 g1 s4 bulk");
  // The variants: template value weights (after tiles) follows the tile's reads.
  MoeConfigEntry entry{shape, sm90a, {}, packed};
  entry.buckets.push_back({16, MoeTileConfig{8, swap_map, GemmTile::wgmma_tile(64, 4, true, 1)}});
  MoeConfigTable table;
  table.entries.push_back(entry);
  TunedMoeOptions options;
  options.table = &table;
  auto requests = fused_moe_variants(shape, options, sm90a, {4}, packed);
  REQUIRE(static_cast<bool>(requests));
  int gemms = 0;
  for (const VariantRequest& r : *requests)
    if (r.def.id == "moe_wgmma1_fp8" || r.def.id == "moe_wgmma2_fp8") {
      ++gemms;
      REQUIRE(r.def.params[10].name == "weights");
      CHECK(r.values[10] ==
            static_cast<int64_t>(r.def.id == "moe_wgmma1_fp8" ? W::packed_map : W::packed_bulk));
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
