// specjit-bench moe-routing: the routings of `specjit-bench moe` (the fixed one, seed 42, and the
// fresh ones of --routings N, seeds 1..N) rebuilt on the host, with each one's distinct experts,
// token blocks and MMA widths. No GPU needed.
#include "bench_common.h"
#include "moe_models.h"
#include "moe_routing.h"

#include <llvm/Support/raw_ostream.h>

namespace specjit::bench {

int run_moe_routing(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--models", "--tokens", "--routings", "--block-m", "--json"},
                   {"--help"}, flags) ||
      flags.has("--help")) {
    llvm::errs() << "usage: specjit-bench moe-routing [--models qwen3,mixtral,deepseek] "
                    "[--tokens 1024] [--routings 100] [--block-m 128] [--json PATH]\n"
                    "  the fixed routing of `specjit-bench moe` (seed 42) and its --routings N "
                    "fresh ones (seeds 1..N),\n"
                    "  each with its distinct experts, token blocks of --block-m and MMA widths; "
                    "no GPU needed\n";
    return flags.has("--help") ? 0 : 2;
  }
  const std::string models = flags.get("--models", "qwen3,mixtral,deepseek");
  int64_t tokens = 0, routings = 0, block_m = 0;
  if (!parse_count(flags, "moe-routing", "--tokens", 1, k_tokens[std::size(k_tokens) - 1], 1024,
                   tokens) ||
      !parse_count(flags, "moe-routing", "--routings", 0, 1000, 100, routings) ||
      !parse_count(flags, "moe-routing", "--block-m", 8, 256, 128, block_m))
    return 2;
  if (block_m % 8 != 0) {
    llvm::errs() << "specjit-bench moe-routing: --block-m must be a multiple of 8, got " << block_m
                 << "\n";
    return 2;
  }
  llvm::json::Array rows;
  for (const Model& model : k_models) {
    if (models.find(std::string(model.name).substr(0, 5)) == std::string::npos)
      continue;
    const ops::MoeShape& s = model.shape;
    llvm::outs() << fmt::format("{} T={} blocks of {}\n  {:>5} {:>8} {:>6} {:>12} {:>11}\n",
                                model.name, tokens, block_m, "seed", "experts", "blocks",
                                "swap cols", "normal rows");
    llvm::json::Array samples;
    for (int64_t r = 0; r <= routings; ++r) {
      const uint32_t seed = r == 0 ? k_routing_seed : static_cast<uint32_t>(r);
      const RoutingBlocks b = benchmark_routing(s, tokens, seed, static_cast<int>(block_m));
      llvm::outs() << fmt::format("  {:>5} {:>8} {:>6} {:>12} {:>11}\n", seed, b.distinct, b.blocks,
                                  b.swap_columns, b.normal_rows);
      samples.push_back(llvm::json::Object{{"seed", static_cast<int64_t>(seed)},
                                           {"fixed", r == 0},
                                           {"distinct_experts", b.distinct},
                                           {"blocks", b.blocks},
                                           {"swap_columns", b.swap_columns},
                                           {"normal_rows", b.normal_rows}});
    }
    rows.push_back(llvm::json::Object{{"model", model.name},
                                      {"tokens", tokens},
                                      {"block_m", block_m},
                                      {"routings", std::move(samples)}});
  }
  if (rows.empty()) {
    std::string known;
    for (const Model& model : k_models)
      known += std::string(known.empty() ? "" : ", ") + model.name;
    llvm::errs() << "specjit-bench moe-routing: --models '" << models
                 << "' names none of the models (by their first five letters): " << known << "\n";
    return 2;
  }
  const std::string json = flags.get("--json", "");
  if (!json.empty() && !write_report(json, llvm::json::Object{{"rows", std::move(rows)}}))
    return 1;
  return 0;
}

} // namespace specjit::bench
