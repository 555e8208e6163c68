// specjit-bench moe-routing: the routings of `specjit-bench moe` (the fixed one, seed 42, and the
// fresh ones of --routings N, seeds 1..N) rebuilt on the host, with each one's distinct experts,
// token blocks and MMA widths. No GPU needed.
#include "bench_common.h"
#include "moe_harness.h"
#include "moe_models.h"
#include "moe_routing.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/raw_ostream.h>

#include <optional>

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
  const int64_t max_tokens = k_tokens[std::size(k_tokens) - 1];
  // A flag's integer in [lo, hi], or an error naming the flag.
  auto integer = [&](const char* name, const char* fallback, int64_t lo,
                     int64_t hi) -> std::optional<int64_t> {
    const std::string text = flags.get(name, fallback);
    int64_t value = 0;
    if (llvm::StringRef(text).getAsInteger(10, value) || value < lo || value > hi) {
      llvm::errs() << "specjit-bench moe-routing: " << name << " must be an integer in [" << lo
                   << ", " << hi << "], got '" << text << "'\n";
      return std::nullopt;
    }
    return value;
  };
  const auto tokens = integer("--tokens", "1024", 1, max_tokens);
  const auto routings = integer("--routings", "100", 0, 1000);
  const auto block_m = integer("--block-m", "128", 8, 256);
  if (!tokens || !routings || !block_m)
    return 2;
  if (*block_m % 8 != 0) {
    llvm::errs() << "specjit-bench moe-routing: --block-m must be a multiple of 8, got " << *block_m
                 << "\n";
    return 2;
  }
  llvm::json::Array rows;
  for (const Model& model : k_models) {
    if (models.find(std::string(model.name).substr(0, 5)) == std::string::npos)
      continue;
    const ops::MoeShape& s = model.shape;
    llvm::outs() << fmt::format("{} T={} blocks of {}\n  {:>5} {:>8} {:>6} {:>12} {:>11}\n",
                                model.name, *tokens, *block_m, "seed", "experts", "blocks",
                                "swap cols", "normal rows");
    llvm::json::Array samples;
    for (int64_t r = 0; r <= *routings; ++r) {
      // As `moe` routes: the fixed logits cover its largest T (the first `tokens` rows route),
      // each fresh routing's just `tokens` rows.
      const uint32_t seed = r == 0 ? k_routing_seed : static_cast<uint32_t>(r);
      const std::vector<float> logits =
          router_logits(r == 0 ? max_tokens : *tokens, s.experts, seed);
      const RoutingBlocks b = routing_blocks(expert_slots(logits, s.experts, s.top_k, *tokens),
                                             static_cast<int>(*block_m));
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
                                      {"tokens", *tokens},
                                      {"block_m", *block_m},
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
