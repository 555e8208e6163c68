#include "log_summary.h"

#include "cli.h"
#include "log_common.h"

#include <algorithm>

namespace specjit::cli {

namespace {

bool slower(const SlowCompile& a, const SlowCompile& b) {
  return a.ms != b.ms ? a.ms > b.ms : a.order < b.order;
}

} // namespace

bool is_strict_refusal(const deploy::LogEvent& event) {
  return event.kind == deploy::EventKind::compile_failed &&
         llvm::StringRef(event.log).startswith("refused:");
}

void LogSummary::add_point(const deploy::LogEvent& event, std::string label) {
  if (!m_keep_points || !event.ts_micros)
    return;
  std::vector<TimelinePoint>& points = m_points[event.kernel];
  if (event.kind == deploy::EventKind::compile && points.size() >= k_max_points_per_kernel) {
    ++m_dropped_points;
    return;
  }
  points.push_back({*event.ts_micros, event.ms, event.phase == "serving", event.kind,
                    std::move(label)});
}

void LogSummary::add(const deploy::LogEvent& event) {
  ++m_events;
  if (event.ts_micros) {
    m_first = std::min(m_first.value_or(*event.ts_micros), *event.ts_micros);
    m_last = std::max(m_last.value_or(*event.ts_micros), *event.ts_micros);
  }
  if (event.kernel.empty())
    return;
  KernelSummary& summary = m_kernels[event.kernel];
  auto note_variant = [&] {
    llvm::StringRef id = event.key.empty() ? llvm::StringRef(event.variant_json) : event.key;
    if (summary.variants.find(std::string_view(id.data(), id.size())) == summary.variants.end())
      summary.variants.emplace(id.str());
  };
  switch (event.kind) {
  case deploy::EventKind::compile: {
    ++summary.compiles;
    summary.compile_ms += event.ms;
    summary.serving_compiles += event.phase == "serving";
    note_variant();
    if (event.ts_micros)
      ++m_compiles_by_minute[*event.ts_micros / 60'000'000];
    add_point(event, "");
    // Ties keep the earlier compile (stable), as a stable sort of the whole log would.
    if (m_slowest.size() == k_slowest && event.ms <= m_slowest.front().ms)
      break;
    m_slowest.push_back({event.kernel, event.variant_json, event.key, event.ts, event.reason,
                         event.phase, event.ms, event.pid, m_order++});
    std::push_heap(m_slowest.begin(), m_slowest.end(), slower);
    if (m_slowest.size() > k_slowest) {
      std::pop_heap(m_slowest.begin(), m_slowest.end(), slower);
      m_slowest.pop_back();
    }
    break;
  }
  case deploy::EventKind::disk_hit:
    ++summary.disk_hits;
    note_variant();
    break;
  case deploy::EventKind::compile_failed:
    ++summary.failures;
    if (is_strict_refusal(event)) {
      ++summary.refusals;
      add_point(event, deploy::describe_variant(deploy::variant_from_json(event.variant_json)));
    }
    break;
  case deploy::EventKind::storm:
    summary.storms[event.param] = event.distinct_values;
    add_point(event, event.param);
    break;
  default:
    break;
  }
}

std::vector<SlowCompile> LogSummary::slowest() const {
  std::vector<SlowCompile> out = m_slowest;
  std::sort(out.begin(), out.end(), slower);
  return out;
}

llvm::json::Object LogSummary::timeline_json() const {
  llvm::json::Object out{{"events", static_cast<int64_t>(m_events)}};
  if (!m_first)
    return out;
  double span = static_cast<double>(*m_last - *m_first) / 1e6;
  int64_t compiles = 0, peak = 0, peak_minute = 0;
  for (const auto& [minute, count] : m_compiles_by_minute) {
    compiles += count;
    if (count > peak)
      std::tie(peak, peak_minute) = std::make_pair(count, minute);
  }
  out["first"] = format_micros(*m_first);
  out["last"] = format_micros(*m_last);
  out["span_seconds"] = span;
  out["compiles_per_minute"] = static_cast<double>(compiles) / std::max(span / 60.0, 1.0);
  out["peak_compiles_per_minute"] = peak;
  if (peak > 0)
    out["peak_minute"] = format_micros(peak_minute * 60'000'000);
  return out;
}

} // namespace specjit::cli
