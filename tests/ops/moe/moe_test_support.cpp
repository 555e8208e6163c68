#include "moe_test_support.h"

#include "engine_fixture.h"

#include "ops/moe/detail.h"
#include "ops/moe/gemm_wgmma.h"

#include "support/error.h"

#include <fmt/format.h>

#include <doctest/doctest.h>

namespace specjit::test {

using namespace runtime;
using namespace ops;

int check_wgmma_variants_compile(Engine& engine, const MoeShape& shape, const MoeTileConfig& config,
                                 MoeWeightLayout layout) {
  TunedMoeOptions options;
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
    const bool gemm1 = (*variant)->name_expression.find("moe_wgmma1") != std::string::npos;
    const GemmTile& tile = gemm1 ? config.gemm1 : config.gemm2;
    // The host's count of the CTA's static shared memory, which the tile rule adds to the dynamic
    // part against the device's limit, is never short of what ptxas allocated (ptxas drops the
    // indices a variant never reads, so it may be over by one 1024-byte step).
    const int predicted =
        static_cast<int>(moe_detail::WgmmaGemm::of(shape, gemm1 ? 1 : 2, config.block_m, tile,
                                                   layout, MoePackedReads::automatic)
                             .static_shared_bytes());
    CHECK((*variant)->shared_bytes <= predicted);
    CHECK((*variant)->shared_bytes + 1024 >= predicted);
    // The schedule, the tiles and the weights' reads (row-major: the rank-3 map; packed: bulk
    // copies or the rank-4 map, as the tile names it or by the rule: weight_reads, whose choices
    // fused_moe_packed_test pins) are spelled by name, then num_tokens.
    static const char* const reads[] = {"row_major_map", "packed_bulk", "packed_map"};
    const auto weights = moe_detail::weight_reads(tile, layout, MoePackedReads::automatic);
    const std::string tail = fmt::format(", specjit_kernels::MoeWeightReads::{}, 0LL>",
                                         reads[static_cast<int>(weights)]);
    CHECK((*variant)->name_expression.find(tail) != std::string::npos);
    if (tile.stream_k())
      CHECK((*variant)->name_expression.find("specjit_kernels::MoeSchedule::stream_k, 1" + tail) !=
            std::string::npos);
    if (tile.dynamic())
      CHECK((*variant)->name_expression.find("specjit_kernels::MoeSchedule::dynamic, 1" + tail) !=
            std::string::npos);
    // The log shows the variant's choices by name too.
    CHECK((*variant)->variant.getString("weights") ==
          llvm::StringRef(reads[static_cast<int>(weights)]));
  }
  return wgmma_variants;
}

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

GemmTile f16_tokens_tile(int warpgroups, int stages, int tiles, MoeSchedule schedule) {
  GemmTile t = GemmTile::wgmma_tile(128 * warpgroups, stages, true, warpgroups, 1, tiles);
  t.f16_tokens = true;
  t.schedule = schedule;
  return t;
}

MoeArgs::MoeArgs(int64_t tokens) {
  const MoeShape& s = shape;
  t.hidden = {k_fake_base, DType::e4m3, {tokens, s.hidden}, {}};
  t.router_logits = {k_fake_base + 0x1000000, DType::f32, {tokens, s.experts}, {}};
  t.w13 = {k_fake_base + 0x2000000, DType::e4m3, {s.experts, 2 * s.intermediate, s.hidden}, {}};
  t.w2 = {k_fake_base + 0x3000000, DType::e4m3, {s.experts, s.hidden, s.intermediate}, {}};
  t.a1_scale = {k_fake_base + 0x4000000, DType::f32, {1}, {}};
  t.w13_scale = {k_fake_base + 0x4001000, DType::f32, {s.experts}, {}};
  t.a2_scale = {k_fake_base + 0x4002000, DType::f32, {1}, {}};
  t.w2_scale = {k_fake_base + 0x4003000, DType::f32, {s.experts}, {}};
  t.out = {k_fake_base + 0x5000000, DType::bf16, {tokens, s.hidden}, {}};
  t.workspace = {k_fake_base + 0x6000000,
                 DType::u8,
                 {static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes)},
                 {}};
}

void check_invalid_argument(llvm::Error err, const std::string& part, bool at_start) {
  ErrorSummary error = summarize(std::move(err));
  INFO("message: " << error.message);
  CHECK(error.code == Errc::invalid_argument);
  if (at_start)
    CHECK(error.message.rfind(part, 0) == 0);
  else
    CHECK(error.message.find(part) != std::string::npos);
}

std::string config_refusal(const MoeShape& shape, const MoeTileConfig& config) {
  llvm::Error err = check_moe_config(shape, config, Arch{9, 0, true});
  return err ? llvm::toString(std::move(err)) : std::string();
}

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

std::string table_error(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  auto table = parse_moe_config_table(text);
  CHECK_FALSE(static_cast<bool>(table));
  return table ? std::string() : summarize(table.takeError()).message;
}

} // namespace specjit::test
