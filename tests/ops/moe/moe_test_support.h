// Helpers shared by the fused MoE tests that need no GPU (fused_moe_compile_test,
// fused_moe_e4m3_compile_test, config_test, fused_moe_packed_test): compiling a configuration's
// wgmma variants, fake device arguments for host-side validation, and the table's JSON round
// trip.
#pragma once

#include "ops/moe/fused_moe.h"
#include "runtime/engine.h"

#include <llvm/Support/Error.h>

#include <string>
#include <string_view>

namespace specjit::test {

// Compiles the variants `config` derives for `shape` at T = 1 on weights in `layout`; checks every
// wgmma GEMM among them for spills and C75xx diagnostics and returns how many there were.
int check_wgmma_variants_compile(runtime::Engine& engine, const ops::MoeShape& shape,
                                 const ops::MoeTileConfig& config,
                                 ops::MoeWeightLayout layout = ops::MoeWeightLayout::row_major);

// Swap-AB tiles of one warpgroup on the stream-K and the dynamic schedules.
ops::GemmTile stream_k_tile(int block_n, int stages);
ops::GemmTile dynamic_tile(int block_n, int stages);
// An FP8 GEMM1 tile on the f16 copy of the tokens: 128 weight rows a warpgroup.
ops::GemmTile f16_tokens_tile(int warpgroups, int stages, int tiles = 1,
                              ops::MoeSchedule schedule = ops::MoeSchedule::fixed);

// A device address no test dereferences: the op checks its arguments before any launch.
inline constexpr CUdeviceptr k_fake_base = 0x7f0000000000ull;

// A small FP8 layer's arguments at `tokens`, every tensor well formed, at fake addresses.
struct MoeArgs {
  ops::MoeShape shape{8, 2, 256, 128, ops::MoeDType::fp8};
  ops::FusedMoeTensors t;
  explicit MoeArgs(int64_t tokens);
};

// Checks that `err` is an invalid_argument error whose message holds `part` (begins with it when
// `at_start`), showing the message when not.
void check_invalid_argument(llvm::Error err, const std::string& part, bool at_start = false);

// Why check_moe_config refuses `config` for `shape` on sm_90a; empty when it does not.
std::string config_refusal(const ops::MoeShape& shape, const ops::MoeTileConfig& config);

// The table's JSON text (what `specjit-bench moe --tune` writes), after checking that it
// parses back to every entry's bucket configurations.
std::string round_trip_json(const ops::MoeConfigTable& table);

// The message parse_moe_config_table refuses `text` with, its first `from` replaced by `to`
// (checked to be refused: empty otherwise).
std::string table_error(std::string text, std::string_view from, std::string_view to);

} // namespace specjit::test
