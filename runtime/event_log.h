// The recompilation log: JSON Lines, one event per line, appended by every process with
// O_APPEND and one write(2) per line, so concurrent writers never interleave inside a line.
// Schema: docs/recompilation-log.md. Every event carries
//   v (schema version), ts (UTC, microseconds, ISO-8601), pid, event, kernel, variant, key
// and per event: compile {ms, arch, nvrtc, reason, diff, phase}, disk_hit {ms, layer},
// compile_failed {log}, entry_corrupt / write_failed {path, detail}, storm {param,
// distinct_values}. Logging never fails a call: a log that cannot be written is reported once
// on stderr and then ignored.
//
// Whole lines only: a short write (a full disk) is cut back off the file, so the next event
// after space returns starts a line of its own. The log rotates past a size limit
// (SPECJIT_LOG_MAX_SIZE): events.jsonl -> events.1.jsonl -> events.2.jsonl (the oldest goes);
// the readers read the rotated files too, oldest first.
#pragma once

#include <llvm/Support/JSON.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

inline constexpr int k_log_schema_version = 1;
inline constexpr int k_kept_rotations = 2;
inline constexpr uint64_t k_default_log_max_bytes = 64ull << 20;

// The log and its rotated files, oldest first: events.2.jsonl, events.1.jsonl, events.jsonl.
std::vector<std::string> rotated_log_paths(llvm::StringRef path);
// The name of rotation `index` (1 = the newest rotated file): events.jsonl -> events.1.jsonl.
std::string rotated_log_path(llvm::StringRef path, int index);

// Opens the log for appending, never through a symlink at its last component. The one place
// the log file is opened: a root-relative open (a checked directory handle) replaces it here.
// Returns the descriptor or -1 with errno set.
int open_log_for_append(const std::string& path);

// Opens the log file for appending: a descriptor, or an error saying why not.
using LogOpener = std::function<llvm::Expected<int>()>;

class EventLog {
public:
  // nullopt: logging off. The file and its directory are created on the first event, by
  // `opener` when given (the cache root's checked open for a log inside the root), else by
  // open_log_for_append(path).
  explicit EventLog(std::optional<std::string> path,
                    uint64_t max_bytes = k_default_log_max_bytes, LogOpener opener = {});
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  bool enabled() const { return m_path.has_value(); }
  const std::optional<std::string>& path() const { return m_path; }

  // Adds v, ts and pid, then appends the event as one line.
  void write(llvm::json::Object event);

private:
  // Both under m_mutex.
  void append(const std::string& line);
  void rotate_if_full();

  // The descriptor, or -1 with a message in `why`.
  int open_file(std::string& why);

  std::optional<std::string> m_path;
  uint64_t m_max_bytes;
  LogOpener m_opener;
  std::mutex m_mutex; // guards m_fd's lazy open, appends and rotation
  int m_fd = -1;
  bool m_reported_failure = false;
};

// "2026-11-29T16:26:23.123456Z"
std::string utc_timestamp_now();

} // namespace specjit::runtime
