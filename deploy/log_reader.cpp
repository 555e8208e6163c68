#include "deploy/log_reader.h"

#include "runtime/event_log.h"
#include "runtime/log_line.h"

#include "support/bounded_file.h"
#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSwitch.h>
#include <llvm/Support/FileSystem.h>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace specjit::deploy {

using runtime::decoded_string;
using runtime::JsonSpan;
using runtime::rotated_log_paths;
using runtime::scan_json_members;
using runtime::span_integer;
using runtime::span_number;

namespace {

constexpr size_t k_kept_bad_line_numbers = 10;

// `layer` may be written as a number or a string; either reads back as text.
std::string any_text(const JsonSpan& span) {
  return span.kind == JsonSpan::Kind::string ? decoded_string(span) : span.raw.str();
}

std::string string_text(const JsonSpan& span) {
  return span.kind == JsonSpan::Kind::string ? decoded_string(span) : std::string();
}

std::string any_field(const llvm::json::Object& object, llvm::StringRef name) {
  const llvm::json::Value* value = object.get(name);
  return value ? variant_value_text(*value) : std::string();
}

std::optional<llvm::json::Value> parse_span(const JsonSpan& span) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(span.raw);
  if (!value) {
    llvm::consumeError(value.takeError());
    return std::nullopt;
  }
  return std::move(*value);
}

std::vector<LoggedDiff> read_diff(const llvm::json::Array& list) {
  std::vector<LoggedDiff> diff;
  for (const llvm::json::Value& item : list) {
    const llvm::json::Object* entry = item.getAsObject();
    if (entry == nullptr)
      continue;
    diff.push_back({any_field(*entry, "component"), any_field(*entry, "cached"),
                    any_field(*entry, "requested"), any_field(*entry, "policy"),
                    any_field(*entry, "name")});
  }
  return diff;
}

// The spans of one line's members, decoded once the whole line is known to be an object.
struct LineSpans {
  std::optional<JsonSpan> event, variant, diff;
};

// One scalar member into the event; nested ones are kept in `spans` for later.
void read_member(LogEvent& event, LineSpans& spans, llvm::StringRef key, const JsonSpan& value) {
  // Dispatch on the first letter: most lines have a dozen members, and comparing each key with
  // every name was a tenth of the reading time.
  switch (key.empty() ? '\0' : key.front()) {
  case 'a': if (key == "arch") event.arch = string_text(value); break;
  case 'd':
    if (key == "diff")
      spans.diff = value;
    else if (key == "detail")
      event.detail = string_text(value);
    else if (key == "distinct_values")
      event.distinct_values = span_integer(value).value_or(0);
    break;
  case 'e': if (key == "event") spans.event = value; break;
  case 'k':
    if (key == "kernel")
      event.kernel = string_text(value);
    else if (key == "key")
      event.key = string_text(value);
    break;
  case 'l':
    if (key == "layer")
      event.layer = any_text(value);
    else if (key == "log")
      event.log = string_text(value);
    break;
  case 'm': if (key == "ms") event.ms = span_number(value).value_or(0.0); break;
  case 'n': if (key == "nvrtc") event.nvrtc = any_text(value); break;
  case 'p':
    if (key == "pid")
      event.pid = span_integer(value).value_or(0);
    else if (key == "phase")
      event.phase = string_text(value);
    else if (key == "path")
      event.path = string_text(value);
    else if (key == "param")
      event.param = string_text(value);
    break;
  case 'r': if (key == "reason") event.reason = string_text(value); break;
  case 't': if (key == "ts") event.ts = string_text(value); break;
  case 'v':
    if (key == "v")
      event.version = span_integer(value).value_or(0);
    else if (key == "variant")
      spans.variant = value;
    break;
  default: break;
  }
}

// Decodes the nested members the options ask for; false when one does not parse.
bool read_nested(LogEvent& event, const LineSpans& spans, const LogReadOptions& options) {
  if (spans.variant && spans.variant->kind == JsonSpan::Kind::object) {
    event.variant_json = spans.variant->raw.str();
    if (options.variants) {
      std::optional<llvm::json::Value> parsed = parse_span(*spans.variant);
      if (!parsed)
        return false;
      event.variant = std::move(*parsed->getAsObject());
    }
  }
  if (options.diffs && spans.diff && spans.diff->kind == JsonSpan::Kind::array) {
    std::optional<llvm::json::Value> parsed = parse_span(*spans.diff);
    if (!parsed)
      return false;
    event.diff = read_diff(*parsed->getAsArray());
  }
  return true;
}

} // namespace

LineResult parse_log_line(llvm::StringRef line, const LogReadOptions& options, LogEvent& event) {
  LineSpans spans;
  bool object = scan_json_members(line, [&](llvm::StringRef key, const JsonSpan& value) {
    read_member(event, spans, key, value);
  });
  if (!object || !spans.event || spans.event->kind != JsonSpan::Kind::string)
    return LineResult::bad;
  if (options.kernel && event.kernel != *options.kernel)
    return LineResult::filtered;
  if (!read_nested(event, spans, options))
    return LineResult::bad;
  event.event = decoded_string(*spans.event);
  event.kind = event_kind_from_name(event.event);
  event.ts_micros = parse_utc_timestamp(event.ts);
  return LineResult::event;
}

std::optional<LogEvent> parse_log_line(llvm::StringRef line) {
  LogEvent event;
  if (parse_log_line(line, LogReadOptions{}, event) != LineResult::event)
    return std::nullopt;
  return event;
}

llvm::json::Object variant_from_json(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value) {
    llvm::consumeError(value.takeError());
    return {};
  }
  const llvm::json::Object* object = value->getAsObject();
  return object ? *object : llvm::json::Object();
}

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm): timegm is
// not in POSIX and depends on the time zone database.
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool take_number(llvm::StringRef& text, size_t digits, unsigned& out) {
  if (text.size() < digits || text.take_front(digits).getAsInteger(10, out))
    return false;
  text = text.drop_front(digits);
  return true;
}

} // namespace

EventKind event_kind_from_name(llvm::StringRef name) {
  return llvm::StringSwitch<EventKind>(name)
      .Case("compile", EventKind::compile)
      .Case("disk_hit", EventKind::disk_hit)
      .Case("compile_failed", EventKind::compile_failed)
      .Case("entry_corrupt", EventKind::entry_corrupt)
      .Case("write_failed", EventKind::write_failed)
      .Case("storm", EventKind::storm)
      .Default(EventKind::other);
}

LogContents parse_log(llvm::StringRef text) {
  LogContents contents;
  size_t number = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++number;
    if (line.trim().empty())
      continue;
    ++contents.lines;
    std::optional<LogEvent> event = parse_log_line(line);
    if (!event) {
      ++contents.bad_lines;
      if (contents.bad_line_numbers.size() < k_kept_bad_line_numbers)
        contents.bad_line_numbers.push_back(number);
      continue;
    }
    event->line = number;
    contents.events.push_back(std::move(*event));
  }
  return contents;
}

namespace {

constexpr uint64_t k_progress_step = 8ull << 20;

llvm::Error scan_file(const std::string& file, LogScan& scan, LogVisitor visit,
                      const LogReadOptions& options, std::optional<LogProgressSink> progress,
                      LogProgress& seen) {
  auto opened = RegularFile::open(file, "log", k_max_log_bytes);
  if (!opened)
    return opened.takeError();
  LineReader reader(std::move(*opened));
  llvm::StringRef line;
  size_t number = 0;
  uint64_t base = seen.bytes_read, next_report = 0;
  while (reader.next(line)) {
    ++number;
    if (line.trim().empty())
      continue;
    ++scan.lines;
    LogEvent event;
    LineResult result = parse_log_line(line, options, event);
    if (result == LineResult::bad) {
      ++scan.bad_lines;
      if (scan.bad_line_numbers.size() < k_kept_bad_line_numbers)
        scan.bad_line_numbers.push_back(number);
    } else if (result == LineResult::event) {
      event.line = number;
      visit(std::move(event), file);
    }
    if (progress && reader.bytes_read() >= next_report) {
      seen.bytes_read = base + reader.bytes_read();
      (*progress)(seen);
      next_report = reader.bytes_read() + k_progress_step;
    }
  }
  seen.bytes_read = base + reader.bytes_read();
  scan.bytes += reader.bytes_read();
  if (auto err = reader.take_error())
    return make_error(Errc::io, "cannot read log {}: {}", file, llvm::toString(std::move(err)));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<LogScan> scan_log(llvm::StringRef path, LogVisitor visit,
                                 const LogReadOptions& options,
                                 std::optional<LogProgressSink> progress) {
  LogScan scan;
  LogProgress seen;
  std::vector<std::string> files;
  for (const std::string& file : rotated_log_paths(path)) {
    uint64_t size = 0;
    if (file != path && llvm::sys::fs::file_size(file, size))
      continue; // rotated files come and go with the writers
    files.push_back(file);
    seen.bytes_total += size;
  }
  if (progress) // the live file's size: after the loop, so it includes a rotation's new file
    if (uint64_t size = 0; !llvm::sys::fs::file_size(path, size))
      seen.bytes_total += size;
  for (const std::string& file : files) {
    if (auto err = scan_file(file, scan, visit, options, progress, seen))
      return err;
    scan.files.push_back(file);
  }
  return scan;
}

llvm::Expected<LogContents> read_log(llvm::StringRef path) {
  LogContents contents;
  auto scan = scan_log(path, [&](LogEvent&& event, llvm::StringRef) {
    contents.events.push_back(std::move(event));
  });
  if (!scan)
    return scan.takeError();
  contents.lines = scan->lines;
  contents.bad_lines = scan->bad_lines;
  contents.bad_line_numbers = scan->bad_line_numbers;
  return contents;
}

std::optional<int64_t> parse_utc_timestamp(llvm::StringRef text) {
  unsigned year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  llvm::StringRef rest = text.trim();
  auto expect = [&](char c) { return rest.consume_front(llvm::StringRef(&c, 1)); };
  if (!take_number(rest, 4, year) || !expect('-') || !take_number(rest, 2, month) || !expect('-') ||
      !take_number(rest, 2, day))
    return std::nullopt;
  if (rest.empty()) // a bare date means its midnight
    return days_from_civil(year, month, day) * 86400 * 1000000;
  if (!(expect('T') || expect(' ')) || !take_number(rest, 2, hour) || !expect(':') ||
      !take_number(rest, 2, minute) || !expect(':') || !take_number(rest, 2, second))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  int64_t micros = 0;
  if (expect('.')) {
    size_t digits = 0;
    while (!rest.empty() && llvm::isDigit(rest.front())) {
      if (digits++ < 6)
        micros = micros * 10 + (rest.front() - '0');
      rest = rest.drop_front();
    }
    for (; digits < 6; ++digits)
      micros *= 10;
  }
  if (!(rest.empty() || rest == "Z" || rest == "+00:00"))
    return std::nullopt;
  int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1000000 + micros;
}

std::string variant_value_text(const llvm::json::Value& value) {
  if (auto text = value.getAsString())
    return text->str();
  std::string out;
  llvm::raw_string_ostream stream(out);
  stream << value;
  return stream.str();
}

std::string describe_variant(const llvm::json::Object& variant) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : variant)
    keys.push_back(key.str());
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const std::string& key : keys) {
    if (!out.empty())
      out += ", ";
    out += key + "=" + variant_value_text(*variant.get(key));
  }
  return out;
}

} // namespace specjit::deploy
