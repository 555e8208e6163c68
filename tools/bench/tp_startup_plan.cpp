// The plan every tp-startup rank runs: its flags, the trace, and the variants it needs.
#include "tp_startup.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <random>

namespace specjit::bench {

namespace {

std::string join_tokens(const std::vector<int64_t>& tokens) {
  std::string text;
  for (int64_t t : tokens)
    text += (text.empty() ? "" : ",") + std::to_string(t);
  return text;
}

bool parse_token_list(llvm::StringRef text, std::vector<int64_t>& tokens) {
  llvm::SmallVector<llvm::StringRef, 16> parts;
  text.split(parts, ',');
  tokens.clear();
  for (llvm::StringRef part : parts) {
    int64_t value = 0;
    if (part.trim().getAsInteger(10, value) || value < 1 || value > 65536) {
      llvm::errs() << "specjit-bench tp-startup: --tokens takes token counts from 1 to 65536 "
                      "separated by commas, not '"
                   << text << "'\n";
      return false;
    }
    tokens.push_back(value);
  }
  return true;
}

bool parse_kernels(llvm::StringRef text, TpPlan& plan) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  text.split(parts, ',');
  plan.inv_rope = plan.moe = false;
  for (llvm::StringRef part : parts) {
    if (part == "inv_rope")
      plan.inv_rope = true;
    else if (part == "moe")
      plan.moe = true;
    else {
      llvm::errs() << "specjit-bench tp-startup: --kernels takes inv_rope and/or moe separated "
                      "by commas, not '"
                   << text << "'\n";
      return false;
    }
  }
  return true;
}

} // namespace

std::vector<std::string> TpPlan::to_args() const {
  std::string kernels = inv_rope && moe ? "inv_rope,moe" : inv_rope ? "inv_rope" : "moe";
  std::vector<std::string> args = {"--kernels",     kernels,
                                   "--tokens",      join_tokens(tokens),
                                   "--trace-steps", std::to_string(trace_steps),
                                   "--max-tokens",  std::to_string(max_tokens),
                                   "--seed",        std::to_string(seed)};
  if (prepare_only)
    args.push_back("--prepare-only");
  return args;
}

std::vector<int64_t> TpPlan::trace() const {
  // A fixed generator and its raw output (not a distribution, whose algorithm the standard
  // leaves open): the same sequence from every build.
  std::mt19937_64 generator(seed);
  std::vector<int64_t> steps(trace_steps);
  for (int64_t& tokens : steps)
    tokens = 1 + static_cast<int64_t>(generator() % static_cast<uint64_t>(max_tokens));
  return steps;
}

int64_t TpPlan::largest_tokens() const {
  return std::max(max_tokens, *std::max_element(tokens.begin(), tokens.end()));
}

bool parse_plan(const Flags& flags, TpPlan& plan) {
  plan.prepare_only = flags.has("--prepare-only");
  if (!parse_kernels(flags.get("--kernels", "inv_rope,moe"), plan) ||
      !parse_token_list(flags.get("--tokens", join_tokens(plan.tokens)), plan.tokens))
    return false;
  int64_t seed = 0;
  if (!parse_count(flags, "tp-startup", "--trace-steps", 0, 100000, plan.trace_steps,
                   plan.trace_steps) ||
      !parse_count(flags, "tp-startup", "--max-tokens", 1, 65536, plan.max_tokens,
                   plan.max_tokens) ||
      !parse_count(flags, "tp-startup", "--seed", 0, INT64_MAX, 1, seed))
    return false;
  plan.seed = static_cast<uint64_t>(seed);
  return true;
}

std::vector<runtime::VariantRequest> tp_variant_requests(const TpPlan& plan,
                                                         const runtime::DeviceFacts& target,
                                                         llvm::ArrayRef<int64_t> tokens) {
  std::vector<runtime::VariantRequest> requests;
  if (plan.inv_rope) // num_tokens is dynamic: one variant serves every count
    requests.push_back({ops::inv_rope_fp8_quant_kernel(),
                        {k_tp_rope_groups, k_tp_rope_heads_per_group, tokens.front()}});
  if (plan.moe) {
    auto moe = must(ops::fused_moe_variants(k_tp_moe_shape, ops::FusedMoeOptions{}, target, tokens),
                    "MoE variants");
    requests.insert(requests.end(), std::make_move_iterator(moe.begin()),
                    std::make_move_iterator(moe.end()));
  }
  return requests;
}

} // namespace specjit::bench
