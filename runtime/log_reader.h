// Reads the recompilation log (JSON Lines, written by runtime/event_log.h) back into typed
// events, for `specjit log`, `specjit why` and `specjit precompile --from-log`.
// A log is appended by many processes and may end in a half-written line after a crash: lines
// that are not JSON objects with an "event" field are counted and skipped, never fatal.
// Fields an event lacks keep their defaults; unknown events are kept with kind `other`.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

enum class EventKind : uint8_t {
  compile,
  disk_hit,
  compile_failed,
  entry_corrupt,
  write_failed,
  storm,
  other,
};
EventKind event_kind_from_name(llvm::StringRef name);

struct LoggedDiff {
  std::string component;
  std::string cached;
  std::string requested;
  std::string policy; // for a template parameter: its policy, e.g. "exact"
  std::string name;   // for a "header" row: the include-directory-relative header name
};

struct LogEvent {
  EventKind kind = EventKind::other;
  std::string event; // the name as written
  size_t line = 0;   // 1-based line in the log
  int64_t version = 0;
  std::string ts;
  std::optional<int64_t> ts_micros; // since the epoch; nullopt when ts does not parse
  int64_t pid = 0;
  std::string kernel;
  llvm::json::Object variant;
  std::string key;
  // compile, disk_hit
  double ms = 0;
  // compile
  std::string arch, nvrtc, reason, phase;
  std::vector<LoggedDiff> diff;
  // disk_hit: the layer, as text ("0" is the writable root)
  std::string layer;
  // compile_failed
  std::string log;
  // entry_corrupt, write_failed
  std::string path, detail;
  // storm
  std::string param;
  int64_t distinct_values = 0;
};

struct LogContents {
  std::vector<LogEvent> events;
  size_t lines = 0;                     // non-empty lines seen
  size_t bad_lines = 0;                 // lines skipped
  std::vector<size_t> bad_line_numbers; // the first few, for messages
};

// Parses a whole log. Never fails: bad lines are counted.
LogContents parse_log(llvm::StringRef text);
// Reads and parses the file at `path`; an error only when it cannot be read.
llvm::Expected<LogContents> read_log(llvm::StringRef path);

// "2026-11-29T16:26:23.123456Z" (fraction optional, "Z" or "+00:00") -> microseconds since the
// epoch. nullopt when the text is not such a time stamp.
std::optional<int64_t> parse_utc_timestamp(llvm::StringRef text);
// A JSON value of a variant object as text: 62, "dynamic" -> dynamic, "<=64".
std::string variant_value_text(const llvm::json::Value& value);
// The variant object as "cols=128, num_tokens=62" (keys sorted).
std::string describe_variant(const llvm::json::Object& variant);

} // namespace specjit::runtime
