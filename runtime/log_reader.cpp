#include "runtime/log_reader.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSwitch.h>
#include <llvm/Support/MemoryBuffer.h>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace specjit::runtime {

namespace {

constexpr size_t k_kept_bad_line_numbers = 10;

std::string string_field(const llvm::json::Object& object, llvm::StringRef name) {
  if (auto text = object.getString(name))
    return text->str();
  return {};
}

// `layer` may be written as a number or a string; either reads back as text.
std::string any_field(const llvm::json::Object& object, llvm::StringRef name) {
  const llvm::json::Value* value = object.get(name);
  return value ? variant_value_text(*value) : std::string();
}

std::vector<LoggedDiff> read_diff(const llvm::json::Object& object) {
  std::vector<LoggedDiff> diff;
  const llvm::json::Array* list = object.getArray("diff");
  if (list == nullptr)
    return diff;
  for (const llvm::json::Value& item : *list) {
    const llvm::json::Object* entry = item.getAsObject();
    if (entry == nullptr)
      continue;
    diff.push_back({any_field(*entry, "component"), any_field(*entry, "cached"),
                    any_field(*entry, "requested"), any_field(*entry, "policy"),
                    any_field(*entry, "name")});
  }
  return diff;
}

std::optional<LogEvent> read_event(llvm::StringRef line) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
  if (!value) {
    llvm::consumeError(value.takeError());
    return std::nullopt;
  }
  const llvm::json::Object* object = value->getAsObject();
  if (object == nullptr || !object->getString("event"))
    return std::nullopt;
  LogEvent event;
  event.event = string_field(*object, "event");
  event.kind = event_kind_from_name(event.event);
  event.version = object->getInteger("v").getValueOr(0);
  event.ts = string_field(*object, "ts");
  event.ts_micros = parse_utc_timestamp(event.ts);
  event.pid = object->getInteger("pid").getValueOr(0);
  event.kernel = string_field(*object, "kernel");
  if (const llvm::json::Object* variant = object->getObject("variant"))
    event.variant = *variant;
  event.key = string_field(*object, "key");
  event.ms = object->getNumber("ms").getValueOr(0.0);
  event.arch = string_field(*object, "arch");
  event.nvrtc = any_field(*object, "nvrtc");
  event.reason = string_field(*object, "reason");
  event.phase = string_field(*object, "phase");
  event.diff = read_diff(*object);
  event.layer = any_field(*object, "layer");
  event.log = string_field(*object, "log");
  event.path = string_field(*object, "path");
  event.detail = string_field(*object, "detail");
  event.param = string_field(*object, "param");
  event.distinct_values = object->getInteger("distinct_values").getValueOr(0);
  return event;
}

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
    std::optional<LogEvent> event = read_event(line);
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

llvm::Expected<LogContents> read_log(llvm::StringRef path) {
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return make_error(Errc::io, "cannot read log {}: {}", path.str(), buffer.getError().message());
  return parse_log((*buffer)->getBuffer());
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

} // namespace specjit::runtime
