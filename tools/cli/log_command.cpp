// specjit log: what compiled, how often, how long it took, and when (from the recompilation log).
#include "cli.h"
#include "log_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace specjit::cli {
namespace {

constexpr size_t k_slowest = 10;

struct KernelSummary {
  int64_t compiles = 0;
  int64_t disk_hits = 0;
  int64_t failures = 0;
  int64_t serving_compiles = 0;
  double compile_ms = 0;
  std::set<std::string> variants;
  std::map<std::string, int64_t> storms; // param -> distinct values at the latest storm
};

struct Timeline {
  std::optional<int64_t> first, last;
  std::map<int64_t, int64_t> compiles_by_minute;
};

llvm::json::Object timeline_json(const Timeline& timeline,
                                 const std::vector<runtime::LogEvent>& all) {
  llvm::json::Object out{{"events", static_cast<int64_t>(all.size())}};
  if (!timeline.first)
    return out;
  double span = static_cast<double>(*timeline.last - *timeline.first) / 1e6;
  int64_t compiles = 0, peak = 0, peak_minute = 0;
  for (const auto& [minute, count] : timeline.compiles_by_minute) {
    compiles += count;
    if (count > peak)
      std::tie(peak, peak_minute) = std::make_pair(count, minute);
  }
  out["first"] = format_micros(*timeline.first);
  out["last"] = format_micros(*timeline.last);
  out["span_seconds"] = span;
  out["compiles_per_minute"] = static_cast<double>(compiles) / std::max(span / 60.0, 1.0);
  out["peak_compiles_per_minute"] = peak;
  if (peak > 0)
    out["peak_minute"] = format_micros(peak_minute * 60'000'000);
  return out;
}

llvm::json::Object kernel_json(const std::string& kernel, const KernelSummary& summary) {
  llvm::json::Array storms;
  for (const auto& [param, distinct] : summary.storms)
    storms.push_back(llvm::json::Object{{"param", param}, {"distinct_values", distinct}});
  return llvm::json::Object{{"kernel", kernel},
                            {"compiles", summary.compiles},
                            {"disk_hits", summary.disk_hits},
                            {"compile_failures", summary.failures},
                            {"compile_seconds", summary.compile_ms / 1000.0},
                            {"variants", static_cast<int64_t>(summary.variants.size())},
                            {"storms", std::move(storms)},
                            {"serving_compiles", summary.serving_compiles}};
}

void print_text(const std::string& path, const LoadedLog& log,
                const std::map<std::string, KernelSummary>& kernels,
                const std::vector<const runtime::LogEvent*>& slowest,
                const llvm::json::Object& timeline) {
  fmt::print("log: {} ({} events{})\n\n", path, log.events.size(),
             log.bad_lines ? fmt::format(", {} unreadable lines skipped", log.bad_lines) : "");
  fmt::print("{:<24} {:>8} {:>9} {:>10} {:>8} {:>8}  storms\n", "kernel", "compiles", "disk hits",
             "compile s", "variants", "serving");
  for (const auto& [kernel, s] : kernels) {
    std::string storms;
    for (const auto& [param, distinct] : s.storms)
      storms += fmt::format("{}{} ({} values)", storms.empty() ? "" : ", ", param, distinct);
    fmt::print("{:<24} {:>8} {:>9} {:>10.2f} {:>8} {:>8}  {}\n", kernel, s.compiles, s.disk_hits,
               s.compile_ms / 1000.0, s.variants.size(), s.serving_compiles,
               storms.empty() ? "-" : storms);
  }
  if (!slowest.empty())
    fmt::print("\nslowest compiles:\n");
  for (const runtime::LogEvent* event : slowest)
    fmt::print("  {:>9.1f} ms  {} {}  {} ({}, {})\n", event->ms, event->kernel,
               variant_text(event->variant), event->ts, event->reason, event->phase);
  if (auto first = timeline.getString("first")) {
    fmt::print("\ntimeline: {} .. {} ({:.0f} s); {:.1f} compiles per minute", first->str(),
               timeline.getString("last")->str(), *timeline.getNumber("span_seconds"),
               *timeline.getNumber("compiles_per_minute"));
    if (auto peak = timeline.getString("peak_minute"))
      fmt::print(", peak {} in the minute from {}",
                 *timeline.getInteger("peak_compiles_per_minute"), peak->str());
    fmt::print("\n");
  }
}

int run_log(Context& context) {
  if (int code = check_since(context))
    return code;
  auto path = log_file(context);
  if (!path)
    return report_error(context, path.takeError());
  auto log = load_log(context, *path);
  if (!log)
    return report_error(context, log.takeError());
  std::map<std::string, KernelSummary> kernels;
  std::vector<const runtime::LogEvent*> compiles;
  Timeline timeline;
  for (const runtime::LogEvent& event : log->events) {
    if (event.ts_micros) {
      timeline.first = std::min(timeline.first.value_or(*event.ts_micros), *event.ts_micros);
      timeline.last = std::max(timeline.last.value_or(*event.ts_micros), *event.ts_micros);
    }
    if (event.kernel.empty())
      continue;
    KernelSummary& summary = kernels[event.kernel];
    std::string variant = event.key.empty() ? runtime::describe_variant(event.variant) : event.key;
    switch (event.kind) {
    case runtime::EventKind::compile:
      ++summary.compiles;
      summary.compile_ms += event.ms;
      summary.serving_compiles += event.phase == "serving";
      summary.variants.insert(variant);
      compiles.push_back(&event);
      if (event.ts_micros)
        ++timeline.compiles_by_minute[*event.ts_micros / 60'000'000];
      break;
    case runtime::EventKind::disk_hit:
      ++summary.disk_hits;
      summary.variants.insert(variant);
      break;
    case runtime::EventKind::compile_failed:
      ++summary.failures;
      break;
    case runtime::EventKind::storm:
      summary.storms[event.param] = event.distinct_values;
      break;
    default:
      break;
    }
  }
  std::stable_sort(compiles.begin(), compiles.end(),
                   [](const auto* a, const auto* b) { return a->ms > b->ms; });
  compiles.resize(std::min(compiles.size(), k_slowest));
  llvm::json::Object timeline_object = timeline_json(timeline, log->events);
  if (!context.json) {
    print_text(*path, *log, kernels, compiles, timeline_object);
    return k_exit_ok;
  }
  llvm::json::Array kernel_list, slowest;
  for (const auto& [kernel, summary] : kernels)
    kernel_list.push_back(kernel_json(kernel, summary));
  for (const runtime::LogEvent* event : compiles)
    slowest.push_back(llvm::json::Object{{"kernel", event->kernel},
                                         {"variant", llvm::json::Object(event->variant)},
                                         {"key", event->key},
                                         {"ms", event->ms},
                                         {"ts", event->ts},
                                         {"reason", event->reason},
                                         {"phase", event->phase},
                                         {"pid", event->pid}});
  print_json(llvm::json::Object{{"log", *path},
                                {"events", static_cast<int64_t>(log->events.size())},
                                {"bad_lines", static_cast<int64_t>(log->bad_lines)},
                                {"kernels", std::move(kernel_list)},
                                {"slowest", std::move(slowest)},
                                {"timeline", std::move(timeline_object)}});
  return k_exit_ok;
}

} // namespace

std::vector<Command> log_commands() {
  return {{"log",
           "what compiled, disk hits, time lost compiling, storms, per kernel",
           "log [--file F] [--kernel K] [--since T] [--json]",
           "  --file F            the log to read (default: SPECJIT_LOG, else "
           "<cache root>/logs/events.jsonl)\n"
           "  --kernel K          only this kernel's events\n"
           "  --since T           only events at or after T: 2026-11-29T16:00:00Z, or an age "
           "such as 30m, 2h, 1d\n",
           "specjit log --since 1h --kernel inv_rope_fp8_quant",
           {{"--file", true, false}, {"--kernel", true, false}, {"--since", true, false}},
           0,
           0,
           run_log},
          why_command()};
}

} // namespace specjit::cli
