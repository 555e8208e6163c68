// What `specjit log` (text, --json, --html) reports, accumulated event by event while the log
// streams past: memory follows the number of kernels, variants and minutes, never the number
// of lines. Only the slowest compiles and, for the page, a bounded sample of compiles per
// kernel are kept as events.
#pragma once

#include "deploy/log_reader.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace specjit::cli {

inline constexpr size_t k_slowest = 10;
inline constexpr size_t k_max_points_per_kernel = 4000;

struct KernelSummary {
  int64_t compiles = 0;
  int64_t disk_hits = 0;
  int64_t failures = 0;
  int64_t serving_compiles = 0;
  int64_t refusals = 0; // compile_failed of a sealed engine under SPECJIT_STRICT=error
  double compile_ms = 0;
  std::set<std::string, std::less<>> variants; // keys (or variant texts when keyless)
  std::map<std::string, int64_t> storms; // param -> distinct values at the latest storm
};

// A compile, a storm or a refusal on the page's timeline.
struct TimelinePoint {
  int64_t ts_micros = 0;
  double ms = 0;
  bool serving = false;
  deploy::EventKind kind = deploy::EventKind::compile;
  std::string label; // storm: the parameter; refusal: the variant
};

struct SlowCompile {
  std::string kernel, variant_json, key, ts, reason, phase;
  double ms = 0;
  int64_t pid = 0;
  uint64_t order = 0; // position in the log: ties go to the earlier compile

  // Decoded only for the few compiles that are shown.
  llvm::json::Object variant() const { return deploy::variant_from_json(variant_json); }
};

class LogSummary {
public:
  explicit LogSummary(bool keep_points) : m_keep_points(keep_points) {}
  void add(const deploy::LogEvent& event);

  size_t events() const { return m_events; }
  const std::map<std::string, KernelSummary>& kernels() const { return m_kernels; }
  // Slowest first.
  std::vector<SlowCompile> slowest() const;
  // Per kernel, in log order; at most k_max_points_per_kernel compiles each (then dropped()).
  const std::map<std::string, std::vector<TimelinePoint>>& points() const { return m_points; }
  size_t dropped_points() const { return m_dropped_points; }
  llvm::json::Object timeline_json() const;
  std::optional<int64_t> first() const { return m_first; }
  std::optional<int64_t> last() const { return m_last; }

private:
  void add_point(const deploy::LogEvent& event, std::string label);

  bool m_keep_points;
  size_t m_events = 0;
  std::map<std::string, KernelSummary> m_kernels;
  std::vector<SlowCompile> m_slowest; // a min-heap on ms, at most k_slowest
  std::map<std::string, std::vector<TimelinePoint>> m_points;
  size_t m_dropped_points = 0;
  std::optional<int64_t> m_first, m_last;
  std::map<int64_t, int64_t> m_compiles_by_minute;
  uint64_t m_order = 0;
};

bool is_strict_refusal(const deploy::LogEvent& event);

} // namespace specjit::cli
