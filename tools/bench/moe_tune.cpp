// specjit-bench moe --tune: per token-count bucket, each GEMM's candidate tiles timed alone, then
// the best pairs together (moe_candidates.h), the fastest kept; the tuned table (written after
// each shape) and the crossover report. The run's state: moe_bench.h.
#include "moe_bench.h"

#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <map>

namespace specjit::bench {

using namespace specjit::ops;

namespace {

constexpr uint32_t k_tune_seed0 = 1000; // --tune-routings' fresh routings: seeds 1001, 1002, ...

} // namespace

void MoeBench::report_failed(const MoeTileConfig& config, int64_t tokens, llvm::Error err) {
  llvm::errs() << "specjit-bench moe: candidate " << config.describe() << " at T=" << tokens
               << " failed: " << llvm::toString(std::move(err)) << "\n";
}

std::optional<double> MoeBench::time_config(const MoeShape& s, const Buffers& b, int64_t tokens,
                                            const MoeTileConfig& config, unsigned stages,
                                            bool programmatic) {
  TunedMoeOptions o;
  o.config = config;
  o.programmatic_launch = programmatic;
  set_choices(o);
  llvm::Error err = fused_moe(engine, s, tensors(b, s, tokens), o, stream);
  o.stages = stages;
  if (err) {
    report_failed(config, tokens, std::move(err));
    must(drv.check(drv.cuCtxSynchronize(), "sync"), "sync");
    return std::nullopt;
  }
  return time_us(engine, drv, s, b, tokens, o, stream, tune_sustain_ms);
}

std::vector<GemmTile> MoeBench::time_alone(const MoeShape& s, const Buffers& b, int64_t tokens,
                                           const MoeCandidateBlock& block, int gemm) {
  std::vector<std::pair<double, GemmTile>> timed;
  for (const GemmTile& tile : gemm == 1 ? block.gemm1 : block.gemm2) {
    const std::vector<GemmTile> forms =
        both_read_forms() ? moe_read_forms(tile) : std::vector<GemmTile>{tile};
    std::optional<std::pair<double, GemmTile>> fastest;
    for (const GemmTile& t : forms) {
      const MoeTileConfig c{block.block_m, gemm == 1 ? t : block.gemm1[0],
                            gemm == 1 ? block.gemm2[0] : t};
      // Never a variant that spills or whose wgmmas ptxas serialized (the table's must not).
      auto clean = moe_gemm_compiles_clean(engine, s, c, gemm, tokens, weights(), packed_reads);
      if (!clean) {
        report_failed(c, tokens, clean.takeError());
        continue;
      }
      if (!*clean) {
        if (verbose)
          llvm::errs() << fmt::format("  gemm{} T={:<5} m{:<3}   skipped (spills or C75xx)  {}\n",
                                      gemm, tokens, block.block_m, t.describe());
        continue;
      }
      const auto us =
          time_config(s, b, tokens, c, gemm == 1 ? moe_stage_gemm1 : moe_stage_gemm2, false);
      if (!us)
        continue;
      if (verbose)
        llvm::errs() << fmt::format("  gemm{} T={:<5} m{:<3} {:>9.1f} us  {}\n", gemm, tokens,
                                    block.block_m, *us, t.describe());
      if (!fastest || *us < fastest->first)
        fastest = {*us, t};
    }
    if (fastest)
      timed.push_back(*fastest);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<GemmTile> ranked;
  for (const auto& [us, tile] : timed)
    ranked.push_back(tile);
  return ranked;
}

std::optional<double> MoeBench::pair_us(const MoeShape& s, const Buffers& b, int64_t tokens,
                                        const MoeTileConfig& c) {
  const unsigned stages = moe_stage_gemm1 | moe_stage_gemm2;
  if (tune_routings <= 1)
    return time_config(s, b, tokens, c, stages, true);
  double sum = 0;
  std::optional<double> us;
  for (int r = 0; r < tune_routings; ++r) {
    set_router_logits(drv, b, s, tokens,
                      r == 0 ? k_routing_seed : k_tune_seed0 + static_cast<uint32_t>(r));
    us = time_config(s, b, tokens, c, stages, true);
    if (!us)
      break;
    sum += *us;
  }
  set_router_logits(drv, b, s, max_tokens, k_routing_seed);
  if (!us)
    return std::nullopt;
  return sum / tune_routings;
}

MoeTileConfig MoeBench::tune_bucket(const Model& model, const MoeShape& s, const Buffers& b,
                                    int64_t tokens, MoeTileConfig chosen) {
  std::vector<MoeTileConfig> pairs = {chosen};
  for (const MoeCandidateBlock& block : moe_candidates(s, tokens, engine.arch(), weights())) {
    const std::vector<GemmTile> gemm1 = time_alone(s, b, tokens, block, 1);
    const std::vector<GemmTile> gemm2 = time_alone(s, b, tokens, block, 2);
    moe_tune_pairs(block.block_m, gemm1, gemm2, pairs);
  }
  double best = 1e30;
  std::map<std::string, std::pair<double, std::string>> best_of; // per family
  for (const MoeTileConfig& c : pairs) {
    const auto us = pair_us(s, b, tokens, c);
    if (!us)
      continue;
    if (verbose)
      llvm::errs() << fmt::format("  pair  T={:<5} {:>9.1f} us  {}\n", tokens, *us, c.describe());
    auto& slot = best_of[moe_family(c)];
    if (slot.second.empty() || *us < slot.first)
      slot = {*us, c.describe()};
    if (*us < best) {
      best = *us;
      chosen = c;
    }
  }
  llvm::json::Object cross{{"model", model.name},
                           {"dtype", moe_dtype_name(s.dtype)},
                           {"tokens", tokens},
                           {"tokens_per_expert", static_cast<double>(tokens * s.top_k) / s.experts},
                           {"winner", moe_family(chosen)}};
  for (const auto& [name, result] : best_of)
    cross[name] = llvm::json::Object{{"gemm_us", result.first}, {"config", result.second}};
  crossover.push_back(std::move(cross));
  return chosen;
}

bool MoeBench::save_tuned_table() const {
  llvm::Error err = llvm::writeToOutput(table_out, [&](llvm::raw_ostream& os) {
    os << llvm::formatv("{0:2}", moe_config_table_to_json(tuned)) << "\n";
    return llvm::Error::success();
  });
  if (err) {
    llvm::errs() << "specjit-bench moe: cannot write " << table_out << ": "
                 << llvm::toString(std::move(err)) << "\n";
    return false;
  }
  llvm::outs() << "tuned table written to " << table_out << "\n";
  return true;
}

bool MoeBench::write_tuned(const Flags& flags) {
  if (!save_tuned_table())
    return false;
  const std::string cross_path = flags.get("--crossover", "docs/bench/moe-crossover-h200.json");
  return write_report(cross_path,
                      llvm::json::Object{{"kernel", "fused_moe GEMM1+GEMM2"},
                                         {"what", "best GEMM-only us per orientation family"},
                                         {"rows", std::move(crossover)}});
}

} // namespace specjit::bench
