// The recompilation log: JSON Lines, one event per line, appended by every process with
// O_APPEND and one write(2) per line, so concurrent writers never interleave inside a line.
// Schema: docs/recompilation-log.md. Every event carries
//   v (schema version), ts (UTC, microseconds, ISO-8601), pid, event, kernel, variant, key
// and per event: compile {ms, arch, nvrtc, reason, diff, phase}, disk_hit {ms, layer},
// compile_failed {log}, entry_corrupt / write_failed {path, detail}, storm {param,
// distinct_values}. Logging never fails a call: a log that cannot be written is reported once
// on stderr and then ignored.
#pragma once

#include <llvm/Support/JSON.h>

#include <mutex>
#include <optional>
#include <string>

namespace specjit::runtime {

inline constexpr int k_log_schema_version = 1;

class EventLog {
public:
  // nullopt: logging off. The file and its directory are created on the first event.
  explicit EventLog(std::optional<std::string> path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  bool enabled() const { return m_path.has_value(); }
  const std::optional<std::string>& path() const { return m_path; }

  // Adds v, ts and pid, then appends the event as one line.
  void write(llvm::json::Object event);

private:
  std::optional<std::string> m_path;
  std::mutex m_mutex; // guards m_fd's lazy open
  int m_fd = -1;
  bool m_reported_failure = false;
};

// "2026-11-29T16:26:23.123456Z"
std::string utc_timestamp_now();

} // namespace specjit::runtime
