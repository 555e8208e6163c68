// The fused MoE GPU cases (fused_moe_test.cpp, fused_moe_forced_test.cpp, moe_align_test.cpp):
// one layer run against the references, at T in {1, 3, 16, 64, 200, 1024}, FP8 and bf16:
// random never-zero weights and inputs, poisoned outputs and workspace; routing ids exactly the
// reference's, grouping equal (padded count, expert per block, each expert's slots: as a set,
// in order for stream-K's stable grouping), the same bytes from a second call and on every
// weight layout, and a sample of output rows within 3e-3 (FP8, against the emulating reference),
// 1e-2 (bf16, against fp32), or by the accuracy rule against the float64 truth (e4m3
// accumulation).
#pragma once

#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/engine.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace specjit::test::moe_gpu {

using ops::MoeConfigTable;
using ops::MoeDType;
using ops::MoeHandoff;
using ops::MoeLaunchOrder;
using ops::MoeShape;
using ops::MoeTileConfig;
using ops::MoeWeightLayout;

struct Model {
  const char* name;
  MoeShape shape;
  int64_t sampled_tokens; // rows compared with the CPU reference
};

// Tile configurations a run can force instead of the default rule's: every kernel family and
// orientation is checked at every token count, not only where the rule picks it.
enum class Forced {
  none,
  wgmma_swap,
  wgmma_split,
  wgmma_stream_k,
  wgmma_dynamic,
  wgmma_dynamic_normal,
  wgmma_normal,
  wgmma_f16_tokens,
  wgmma_e4m3,
  wgmma_e4m3w,
  wgmma_e4m3_sorted,
  mma
};

// The comma-separated list in environment variable `name`, as ",a,b,", or nullopt when unset;
// listed(list, item): whether item is one of it.
inline std::optional<std::string> env_list(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr)
    return std::nullopt;
  return std::string(",") + value + ",";
}
inline bool listed(const std::string& list, llvm::StringRef item) {
  return list.find(("," + item + ",").str()) != std::string::npos;
}

// The forced families of the "every GEMM kernel" case, by the names SPECJIT_FORCED_ONLY uses.
inline constexpr int k_forced_family_count = 8;
extern const std::pair<Forced, const char*> k_forced_families[k_forced_family_count];
// Whether SPECJIT_FORCED_ONLY (a comma-separated list of families and dtypes) selects them.
bool forced_selected(const char* family, MoeDType dtype);

// The tiles `forced` runs at `tokens` (nullopt: the default rule's or the table's).
std::optional<MoeTileConfig> forced_config(const MoeShape& s, int64_t tokens, Forced forced);

// `handoff`, `order`, `accumulation`: TunedMoeOptions::handoff, launch_order, accumulation.
// `calls`: the layer runs that many times on the same workspace; `table`: the configurations come
// from it, and T = 4000 runs too; `weight_layout`: the layout of the weights the checked calls
// read (fused_moe_support.cpp).
void run_model(const Model& model, Forced forced = Forced::none,
               MoeHandoff handoff = MoeHandoff::automatic, int calls = 1,
               MoeLaunchOrder order = MoeLaunchOrder::automatic,
               const MoeConfigTable* table = nullptr,
               MoeWeightLayout weight_layout = MoeWeightLayout::row_major,
               ops::MoeAccumulation accumulation = ops::MoeAccumulation::e4m3);

// moe_align alone against the reference's grouping (fused_moe_support.cpp).
void check_align(runtime::Engine& engine, int64_t experts, int64_t tokens, int64_t top_k,
                 int block_m, bool stable);

extern const Model k_qwen, k_mixtral, k_deepseek;
Model as_bf16(Model model);

} // namespace specjit::test::moe_gpu
