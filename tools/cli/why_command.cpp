// specjit why KERNEL: for the latest compiles of a kernel, which key components differed from
// the nearest cached variant, in words. The log says what differed when the compile happened
// (reason, diff); the disk says what is cached now (every value of each parameter).
#include "cli.h"
#include "log_common.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <set>

namespace specjit::cli {
namespace {

constexpr size_t k_default_last = 3;

// What the cache holds for one kernel: each parameter's values (per entry key) and policies.
struct CachedKernel {
  std::map<std::string, std::map<std::string, std::string>> values; // param -> key -> value
  std::map<std::string, std::string> policies;
  size_t entries = 0;
};

CachedKernel cached_kernel(const Context& context, const std::string& kernel) {
  CachedKernel cached;
  cache::DiskStore store(store_options(context.config));
  for (const cache::ListedEntry& entry : store.list(llvm::StringRef(kernel))) {
    if (!entry.metadata)
      continue;
    ++cached.entries;
    std::string key = entry.key ? entry.key->hex() : entry.location.path;
    for (const auto& [param, value] : entry.metadata->variant)
      cached.values[param.str()][key] = deploy::variant_value_text(value);
    for (const auto& [param, value] : entry.metadata->policies)
      cached.policies.emplace(param.str(), deploy::variant_value_text(value));
  }
  return cached;
}

// The values of `param` cached under keys other than `own_key` (the compile's own entry).
std::set<std::string> other_values(const CachedKernel& cached, const std::string& param,
                                   const std::string& own_key, const std::string& requested) {
  std::set<std::string> values;
  auto it = cached.values.find(param);
  if (it == cached.values.end())
    return values;
  for (const auto& [key, value] : it->second)
    if (key != own_key && value != requested)
      values.insert(value);
  return values;
}

std::string explain_param(const CachedKernel& cached, const deploy::LogEvent& event,
                          const std::string& param, std::string policy,
                          const std::string& requested, int64_t& other_count) {
  if (policy.empty() && cached.policies.count(param))
    policy = cached.policies.at(param);
  std::set<std::string> others = other_values(cached, param, event.key, requested);
  other_count = static_cast<int64_t>(others.size());
  bool known = false;
  if (auto it = cached.values.find(param); it != cached.values.end())
    for (const auto& [key, value] : it->second)
      known |= key != event.key && value == requested;
  std::string under = policy.empty() ? "" : " under policy " + policy;
  if (known)
    return fmt::format("{}: {} is cached{}, but not together with this variant's other values",
                       param, requested, under);
  return fmt::format("{}: {} is a new value{}; {}", param, requested, under,
                     others.empty() ? std::string("no other values cached")
                                    : fmt::format("{} other value{} cached", others.size(),
                                                  others.size() == 1 ? "" : "s"));
}

std::string explain_component(const deploy::LoggedDiff& diff) {
  if (diff.component == "source_digest")
    return fmt::format("source_digest: the kernel source or a header it includes changed "
                       "(cached {}, now {})",
                       diff.cached.substr(0, 12), diff.requested.substr(0, 12));
  if (diff.component == "header")
    return fmt::format("header {} changed: cached {}, now {}", diff.name, diff.cached,
                       diff.requested);
  if (diff.component == "nvrtc_version")
    return fmt::format("nvrtc_version: the compiler changed from {} to {}", diff.cached,
                       diff.requested);
  return fmt::format("{}: cached {}, requested {}", diff.component, diff.cached, diff.requested);
}

llvm::json::Object explain(const CachedKernel& cached, const deploy::LogEvent& event,
                           std::vector<std::string>& lines) {
  llvm::json::Array components;
  auto add = [&](const deploy::LoggedDiff& diff, std::string text, int64_t others) {
    lines.push_back(text);
    llvm::json::Object item{{"component", diff.component},
                            {"cached", diff.cached},
                            {"requested", diff.requested},
                            {"explanation", std::move(text)}};
    if (others >= 0)
      item["other_cached_values"] = others;
    components.push_back(std::move(item));
  };
  for (const deploy::LoggedDiff& diff : event.diff) {
    int64_t others = -1;
    if (event.variant.get(diff.component) == nullptr) {
      add(diff, explain_component(diff), -1);
      continue;
    }
    std::string text =
        explain_param(cached, event, diff.component, diff.policy, diff.requested, others);
    add(diff, std::move(text), others);
  }
  if (event.diff.empty() && event.reason == "new_variant") // an older log without a diff
    for (const auto& [param, value] : event.variant) {
      int64_t others = -1;
      std::string requested = deploy::variant_value_text(value);
      if (other_values(cached, param.str(), event.key, "").count(requested))
        continue;
      std::string text = explain_param(cached, event, param.str(), "", requested, others);
      add({param.str(), "", requested, ""}, std::move(text), others);
    }
  if (lines.empty())
    lines.push_back(event.reason == "first_use"
                        ? "first compile of this kernel: nothing was cached to compare with"
                    : event.reason == "corrupt_entry"
                        ? "the cached entry failed verification; it was moved aside and recompiled"
                        : "no key component differed (another process may have compiled it)");
  return llvm::json::Object{{"ts", event.ts},
                            {"variant", llvm::json::Object(event.variant)},
                            {"key", event.key},
                            {"reason", event.reason},
                            {"phase", event.phase},
                            {"ms", event.ms},
                            {"components", std::move(components)}};
}

// --variant cols=128,num_tokens=62: every named parameter must show that value.
bool matches(const deploy::LogEvent& event, const std::map<std::string, std::string>& wanted) {
  for (const auto& [param, value] : wanted) {
    const llvm::json::Value* actual = event.variant.get(param);
    if (actual == nullptr || deploy::variant_value_text(*actual) != value)
      return false;
  }
  return true;
}

int run_why(Context& context) {
  if (int code = check_since(context))
    return code;
  std::string kernel = context.args.positional.front();
  std::map<std::string, std::string> wanted;
  if (auto text = context.args.value("--variant")) {
    llvm::SmallVector<llvm::StringRef, 4> pairs;
    llvm::StringRef(*text).split(pairs, ',', -1, false);
    for (llvm::StringRef pair : pairs) {
      auto [name, value] = pair.split('=');
      if (name.trim().empty() || value.trim().empty())
        return usage_error(context, fmt::format("--variant expects k=v,...; not '{}'", pair.str()));
      wanted[name.trim().str()] = value.trim().str();
    }
  }
  size_t last = k_default_last;
  if (auto text = context.args.value("--last")) {
    auto parsed = parse_integer_in("--last", *text, {1, 1'000'000});
    if (!parsed)
      return usage_error(context, llvm::toString(parsed.takeError()));
    last = static_cast<size_t>(*parsed);
  }
  auto path = log_file(context);
  if (!path)
    return report_error(context, path.takeError());
  // Streams the log keeping only the latest `last` matching compiles.
  std::deque<deploy::LogEvent> compiles;
  int64_t storms = 0;
  auto scan = stream_log(context, *path, [&](deploy::LogEvent&& event, llvm::StringRef) {
    if (event.kernel != kernel)
      return;
    if (event.kind == deploy::EventKind::storm && ++storms && !context.json)
      fmt::print("storm: {} distinct values of {} compiled; consider policy dynamic or bucketed\n",
                 event.distinct_values, event.param);
    if (event.kind != deploy::EventKind::compile || !matches(event, wanted))
      return;
    compiles.push_back(std::move(event));
    if (compiles.size() > last)
      compiles.pop_front();
  }, deploy::LogReadOptions{true, true, kernel});
  if (!scan)
    return report_error(context, scan.takeError());
  if (compiles.empty())
    return report_error(context, fmt::format("no compile of {}{} in {}", kernel,
                                             wanted.empty() ? "" : " matching --variant", *path));
  CachedKernel cached = cached_kernel(context, kernel);
  llvm::json::Array explanations;
  for (const deploy::LogEvent& compile : compiles) {
    const deploy::LogEvent* event = &compile;
    std::vector<std::string> lines;
    explanations.push_back(explain(cached, *event, lines));
    if (context.json)
      continue;
    fmt::print("{} compiled {} {} in {:.1f} ms ({}, {})\n", event->ts, kernel,
               variant_text(event->variant), event->ms, event->reason, event->phase);
    for (const std::string& line : lines)
      fmt::print("  {}\n", line);
  }
  if (context.json)
    print_json(llvm::json::Object{{"kernel", kernel},
                                  {"cached_entries", static_cast<int64_t>(cached.entries)},
                                  {"storms", storms},
                                  {"compiles", std::move(explanations)}});
  return k_exit_ok;
}

} // namespace

Command why_command() {
  return {"why",
          "why a kernel compiled: the key components that differed from the cache",
          "why KERNEL [--variant k=v,...] [--last N] [--file F] [--since T] [--json]",
          "  --variant k=v,...   only compiles of variants with these values\n"
          "  --last N            explain the latest N compiles (default 3)\n"
          "  --file F            the log to read (default: the configured log)\n"
          "  --since T           only compiles at or after T (UTC time, or an age: 30m, 2h)\n",
          "specjit why scale_tokens --variant num_tokens=62",
          {{"--variant", true, false},
           {"--last", true, false},
           {"--file", true, false},
           {"--since", true, false}},
          1,
          1,
          run_why};
}

} // namespace specjit::cli
