#include "runtime/log_line.h"

#include <llvm/Support/JSON.h>

#include <charconv>

namespace specjit::runtime {

namespace {

class Cursor {
public:
  explicit Cursor(llvm::StringRef text) : m_text(text) {}

  bool at_end() const { return m_pos >= m_text.size(); }
  char peek() const { return at_end() ? '\0' : m_text[m_pos]; }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\r' || peek() == '\n'))
      ++m_pos;
  }
  bool consume(char c) {
    skip_space();
    if (peek() != c)
      return false;
    ++m_pos;
    return true;
  }

  // At an opening quote: the content up to the closing one.
  bool string(llvm::StringRef& content, bool& escaped) {
    size_t start = ++m_pos;
    escaped = false;
    while (!at_end()) {
      char c = m_text[m_pos];
      if (c == '"') {
        content = m_text.slice(start, m_pos++);
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return false;
      if (c == '\\') {
        escaped = true;
        ++m_pos;
      }
      ++m_pos;
    }
    return false;
  }

  // At '{' or '[': past the matching bracket; strings inside are skipped whole.
  bool nested(llvm::StringRef& raw) {
    size_t start = m_pos;
    int depth = 0;
    while (!at_end()) {
      char c = peek();
      if (c == '"') {
        llvm::StringRef ignored;
        bool escaped = false;
        if (!string(ignored, escaped))
          return false;
        continue;
      }
      ++m_pos;
      if (c == '{' || c == '[')
        ++depth;
      else if ((c == '}' || c == ']') && --depth == 0) {
        raw = m_text.slice(start, m_pos);
        return true;
      }
    }
    return false;
  }

  bool scalar(JsonSpan& span) {
    size_t start = m_pos;
    while (!at_end() && llvm::StringRef("+-.0123456789eEtruefalsn").contains(peek()))
      ++m_pos;
    span.raw = m_text.slice(start, m_pos);
    if (span.raw == "true" || span.raw == "false" || span.raw == "null") {
      span.kind = JsonSpan::Kind::literal;
      return true;
    }
    span.kind = JsonSpan::Kind::number;
    return span_number(span).has_value();
  }

  bool value(JsonSpan& span) {
    skip_space();
    switch (peek()) {
    case '"': span.kind = JsonSpan::Kind::string; return string(span.raw, span.escaped);
    case '{': span.kind = JsonSpan::Kind::object; return nested(span.raw);
    case '[': span.kind = JsonSpan::Kind::array; return nested(span.raw);
    default: return scalar(span);
    }
  }

private:
  llvm::StringRef m_text;
  size_t m_pos = 0;
};

} // namespace

bool scan_json_members(llvm::StringRef line,
                       llvm::function_ref<void(llvm::StringRef key, const JsonSpan& value)> member) {
  Cursor cursor(line);
  if (!cursor.consume('{'))
    return false;
  if (cursor.consume('}')) {
    cursor.skip_space();
    return cursor.at_end();
  }
  while (true) {
    cursor.skip_space();
    if (cursor.peek() != '"')
      return false;
    llvm::StringRef key;
    bool escaped = false;
    JsonSpan value;
    if (!cursor.string(key, escaped) || !cursor.consume(':') || !cursor.value(value))
      return false;
    member(key, value);
    if (cursor.consume(','))
      continue;
    if (!cursor.consume('}'))
      return false;
    cursor.skip_space();
    return cursor.at_end();
  }
}

std::string decoded_string(const JsonSpan& span) {
  if (!span.escaped)
    return span.raw.str();
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(("\"" + span.raw + "\"").str());
  if (!value) {
    llvm::consumeError(value.takeError());
    return span.raw.str();
  }
  auto text = value->getAsString();
  return text ? text->str() : span.raw.str();
}

std::optional<double> span_number(const JsonSpan& span) {
  if (span.kind != JsonSpan::Kind::number || span.raw.empty())
    return std::nullopt;
  double value = 0;
  const char* end = span.raw.data() + span.raw.size();
  auto [stop, error] = std::from_chars(span.raw.data(), end, value);
  if (error != std::errc() || stop != end)
    return std::nullopt;
  return value;
}

std::optional<int64_t> span_integer(const JsonSpan& span) {
  int64_t value = 0;
  if (span.kind != JsonSpan::Kind::number || span.raw.getAsInteger(10, value))
    return std::nullopt;
  return value;
}

} // namespace specjit::runtime
