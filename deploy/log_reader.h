// Reads the recompilation log (JSON Lines, written by runtime/event_log.h) back into typed
// events, for `specjit log`, `specjit why` and `specjit precompile --from-log`.
// A log is appended by many processes and may end in a half-written line after a crash: lines
// that are not JSON objects with an "event" field are counted and skipped, never fatal.
// Fields an event lacks keep their defaults; unknown events are kept with kind `other`.
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specjit::deploy {

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
  llvm::json::Object variant; // empty when read with LogReadOptions::variants off
  std::string variant_json;   // the variant object's text as logged, always
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

// What a reader decodes. Decoding the nested variant and diff objects is most of the cost of a
// line: `specjit log` leaves them out (variant_json keeps the text); --kernel filters before
// anything is decoded.
struct LogReadOptions {
  bool variants = true;
  bool diffs = true;
  std::optional<std::string> kernel; // only this kernel's events (others are not handed over)
};

enum class LineResult { event, filtered, bad };
// Parses one line into `event`: bad when it is not a JSON object with an "event" field.
LineResult parse_log_line(llvm::StringRef line, const LogReadOptions& options, LogEvent& event);
std::optional<LogEvent> parse_log_line(llvm::StringRef line);
// A logged variant object's text back as an object (empty when it does not parse).
llvm::json::Object variant_from_json(llvm::StringRef text);
// Parses a whole log held in memory (tests, the fuzzer). Never fails: bad lines are counted.
LogContents parse_log(llvm::StringRef text);

// What a streamed read saw; the events went to the visitor.
struct LogScan {
  std::vector<std::string> files; // read, oldest first
  size_t lines = 0;
  size_t bad_lines = 0;
  std::vector<size_t> bad_line_numbers; // the first few (line numbers within their file)
  uint64_t bytes = 0;
};
struct LogProgress {
  uint64_t bytes_read = 0;
  uint64_t bytes_total = 0;
};
using LogVisitor = llvm::function_ref<void(LogEvent&& event, llvm::StringRef file)>;
using LogProgressSink = llvm::function_ref<void(const LogProgress&)>;

// Streams the log at `path` and its rotated predecessors (event_log.h: rotated_log_paths),
// oldest first, line by line with bounded memory. Each file must be a regular file of at most
// k_max_log_bytes; an error when one cannot be read (a missing rotated file is skipped, a
// missing `path` is an error). `progress`, when given, is called every few megabytes.
llvm::Expected<LogScan> scan_log(llvm::StringRef path, LogVisitor visit,
                                 const LogReadOptions& options = {},
                                 std::optional<LogProgressSink> progress = std::nullopt);
// scan_log into memory, for small logs and tests.
llvm::Expected<LogContents> read_log(llvm::StringRef path);

// "2026-11-29T16:26:23.123456Z" (fraction optional, "Z" or "+00:00") -> microseconds since the
// epoch. nullopt when the text is not such a time stamp.
std::optional<int64_t> parse_utc_timestamp(llvm::StringRef text);
// A JSON value of a variant object as text: 62, "dynamic" -> dynamic, "<=64".
std::string variant_value_text(const llvm::json::Value& value);
// The variant object as "cols=128, num_tokens=62" (keys sorted).
std::string describe_variant(const llvm::json::Object& variant);

} // namespace specjit::deploy
