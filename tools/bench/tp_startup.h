// specjit-bench tp-startup: N tensor-parallel ranks, N processes started at once on one cache
// root, each making the same kernels ready (inverse-RoPE, DeepSeek-V3 TP8's MoE layer) and then
// serving a trace of token counts; first on an empty root (cold), then again on the same root
// (warm). The parent starts the ranks (this binary again, in a hidden per-rank mode), releases
// them at one instant, releases their ready phases at one instant once all are set up, and
// reads their results and the recompilation log.
#pragma once

#include "bench_common.h"

#include "ops/moe/fused_moe.h"
#include "runtime/kernel_def.h"

#include <llvm/Support/JSON.h>

#include <cstdint>
#include <string>
#include <vector>

namespace specjit::bench {

// The inverse-RoPE shape (DeepSeek-V4 attention output, as `specjit-bench inv-rope` runs it)
// and the MoE layer (DeepSeek-V3 at eight-way tensor parallelism, FP8).
inline constexpr int64_t k_tp_rope_groups = 8, k_tp_rope_heads_per_group = 16;
inline constexpr int64_t k_tp_rope_max_pos = 8192;
inline constexpr ops::MoeShape k_tp_moe_shape{256, 8, 7168, 256, ops::MoeDType::fp8};

// What every rank does, identical across ranks (TP ranks see the same batches).
struct TpPlan {
  bool prepare_only = false; // no GPU: Engine::prepare (compile or disk load) instead of launches
  bool inv_rope = true;
  bool moe = true;
  std::vector<int64_t> tokens = {1, 4, 16, 64, 256, 1024}; // the warm-up's token counts
  int64_t trace_steps = 200;
  int64_t max_tokens = 2048; // the trace's token counts: uniform in [1, max_tokens]
  uint64_t seed = 1;

  // The flags that give a rank this plan.
  std::vector<std::string> to_args() const;
  // The trace's token counts, the same sequence in every rank.
  std::vector<int64_t> trace() const;
  int64_t largest_tokens() const;
};

// The plan's flags (--prepare-only, --kernels, --tokens, --trace-steps, --max-tokens, --seed):
// false, with a message naming the flag, for a bad value.
bool parse_plan(const Flags& flags, TpPlan& plan);
inline const std::vector<std::string> k_tp_plan_value_flags = {
    "--kernels", "--tokens", "--trace-steps", "--max-tokens", "--seed"};

// Every variant the plan's kernels need at these token counts on `target` (its arch and device
// pick the MoE table entry).
std::vector<runtime::VariantRequest> tp_variant_requests(const TpPlan& plan,
                                                         const runtime::DeviceFacts& target,
                                                         llvm::ArrayRef<int64_t> tokens);

// One rank's work, in the process the parent started: waits for the release (EOF on
// release_fd), sets up, writes a byte to setup_done_fd and waits for the second release (EOF on
// ready_release_fd; without these two, no barrier), then runs the plan on `cache_dir` (device
// `device`) and writes its result JSON to `result_path`. The device data kernel comes from
// `data_cache_dir` (device_random.h). Returns the process's exit status.
struct RankArgs {
  int64_t rank = 0;
  int64_t device = 0;
  int release_fd = -1;
  int setup_done_fd = -1;
  int ready_release_fd = -1;
  std::string cache_dir;
  std::string data_cache_dir;
  std::string result_path;
};
int run_tp_rank(const TpPlan& plan, const RankArgs& args);

// The parent's analysis of one run (cold or warm) from the ranks' results and the log at
// `log_path`: per-rank compile dependencies and waits, totals, the acceptance checks.
llvm::json::Object analyse_tp_run(const std::string& phase, std::vector<llvm::json::Object> ranks,
                                  const std::string& log_path);
// Prints one run's rows and its verdict.
void print_tp_run(const llvm::json::Object& run);

int run_tp_startup(int argc, char** argv);

} // namespace specjit::bench
