// specjit log: what compiled, how often, how long it took, and when (from the recompilation log).
#include "cli.h"
#include "log_common.h"
#include "log_html.h"
#include "log_summary.h"

#include <fmt/format.h>

namespace specjit::cli {
namespace {

llvm::json::Object kernel_json(const std::string& kernel, const KernelSummary& summary) {
  llvm::json::Array storms;
  for (const auto& [param, distinct] : summary.storms)
    storms.push_back(llvm::json::Object{{"param", param}, {"distinct_values", distinct}});
  return llvm::json::Object{{"kernel", kernel},
                            {"compiles", summary.compiles},
                            {"disk_hits", summary.disk_hits},
                            {"compile_failures", summary.failures},
                            {"strict_refusals", summary.refusals},
                            {"compile_seconds", summary.compile_ms / 1000.0},
                            {"variants", static_cast<int64_t>(summary.variants.size())},
                            {"storms", std::move(storms)},
                            {"serving_compiles", summary.serving_compiles}};
}

void print_text(const std::string& path, const deploy::LogScan& scan, const LogSummary& log) {
  fmt::print("log: {} ({} events{}{})\n\n", path, log.events(),
             scan.bad_lines ? fmt::format(", {} unreadable lines skipped", scan.bad_lines) : "",
             scan.files.size() > 1 ? fmt::format(", {} files", scan.files.size()) : "");
  fmt::print("{:<24} {:>8} {:>9} {:>10} {:>8} {:>8}  storms\n", "kernel", "compiles", "disk hits",
             "compile s", "variants", "serving");
  for (const auto& [kernel, s] : log.kernels()) {
    std::string storms;
    for (const auto& [param, distinct] : s.storms)
      storms += fmt::format("{}{} ({} values)", storms.empty() ? "" : ", ", param, distinct);
    fmt::print("{:<24} {:>8} {:>9} {:>10.2f} {:>8} {:>8}  {}\n", kernel, s.compiles, s.disk_hits,
               s.compile_ms / 1000.0, s.variants.size(), s.serving_compiles,
               storms.empty() ? "-" : storms);
  }
  std::vector<SlowCompile> slowest = log.slowest();
  if (!slowest.empty())
    fmt::print("\nslowest compiles:\n");
  for (const SlowCompile& c : slowest)
    fmt::print("  {:>9.1f} ms  {} {}  {} ({}, {})\n", c.ms, c.kernel, variant_text(c.variant()), c.ts, c.reason,
               c.phase);
  llvm::json::Object timeline = log.timeline_json();
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

void print_log_json(const std::string& path, const deploy::LogScan& scan, const LogSummary& log) {
  llvm::json::Array kernel_list, slowest;
  for (const auto& [kernel, summary] : log.kernels())
    kernel_list.push_back(kernel_json(kernel, summary));
  for (const SlowCompile& c : log.slowest())
    slowest.push_back(llvm::json::Object{{"kernel", c.kernel},
                                         {"variant", c.variant()},
                                         {"key", c.key},
                                         {"ms", c.ms},
                                         {"ts", c.ts},
                                         {"reason", c.reason},
                                         {"phase", c.phase},
                                         {"pid", c.pid}});
  llvm::json::Array files;
  for (const std::string& file : scan.files)
    files.push_back(file);
  print_json(llvm::json::Object{{"log", path},
                                {"files", std::move(files)},
                                {"events", static_cast<int64_t>(log.events())},
                                {"bad_lines", static_cast<int64_t>(scan.bad_lines)},
                                {"kernels", std::move(kernel_list)},
                                {"slowest", std::move(slowest)},
                                {"timeline", log.timeline_json()}});
}

int run_log(Context& context) {
  if (int code = check_since(context))
    return code;
  auto path = log_file(context);
  if (!path)
    return report_error(context, path.takeError());
  std::optional<std::string> html = context.args.value("--html");
  LogSummary log(/*keep_points=*/html.has_value());
  // The summary needs no decoded variants or diffs (variant_json is enough).
  deploy::LogReadOptions options;
  options.variants = options.diffs = false;
  auto scan = stream_log(
      context, *path, [&](deploy::LogEvent&& event, llvm::StringRef) { log.add(event); }, options);
  if (!scan)
    return report_error(context, scan.takeError());
  if (html) {
    if (auto err = write_log_page(*html, *path, *scan, log))
      return report_error(context, std::move(err));
    if (!context.json)
      fmt::print("wrote {} ({} events, {} kernels)\n", *html, log.events(), log.kernels().size());
    else
      print_json(llvm::json::Object{{"log", *path}, {"html", *html},
                                    {"events", static_cast<int64_t>(log.events())}});
    return k_exit_ok;
  }
  if (context.json)
    print_log_json(*path, *scan, log);
  else
    print_text(*path, *scan, log);
  return k_exit_ok;
}

} // namespace

std::vector<Command> log_commands() {
  return {{"log",
           "what compiled, disk hits, time lost compiling, storms, per kernel",
           "log [--file F] [--kernel K] [--since T] [--html PAGE] [--json]",
           "  --file F            the log to read (default: SPECJIT_LOG, else "
           "<cache root>/logs/events.jsonl)\n"
           "  --kernel K          only this kernel's events\n"
           "  --since T           only events at or after T: 2026-11-29T16:00:00Z, or an age "
           "such as 30m, 2h, 1d\n"
           "  --html PAGE         write one self-contained HTML page (inline SVG, no network):\n"
           "                      the compile timeline per kernel, storms, strict refusals, the\n"
           "                      slowest compiles and their reasons\n",
           "specjit log --since 1h --kernel inv_rope_fp8_quant",
           {{"--file", true, false},
            {"--kernel", true, false},
            {"--since", true, false},
            {"--html", true, false}},
           0,
           0,
           run_log},
          why_command()};
}

} // namespace specjit::cli
