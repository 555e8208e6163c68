#include "deploy/manifest_text.h"

#include "support/error.h"

#include <fmt/format.h>

#include <optional>
#include <set>

namespace specjit::deploy {

namespace {

// Deeper documents are rejected before llvm::json::parse, whose recursion the fuzzer would
// otherwise drive into the stack limit; no real manifest nests more than four levels.
constexpr int k_max_depth = 64;

} // namespace

std::string child_path(const std::string& parent, llvm::StringRef key) {
  return parent.empty() ? key.str() : parent + "." + key.str();
}

std::string element_path(const std::string& parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

namespace {

// Walks the (already validated) text and records the line of every key by its path.
class LineScanner {
public:
  LineScanner(llvm::StringRef text, std::map<std::string, unsigned>& lines)
      : m_text(text), m_lines(lines) {}

  void scan() { value("", 0); }
  // The first key that appears twice in one object: its path and the line of the repeat.
  const std::optional<std::pair<std::string, unsigned>>& duplicate() const { return m_duplicate; }

private:
  bool at_end() const { return m_pos >= m_text.size(); }
  char peek() const { return at_end() ? '\0' : m_text[m_pos]; }
  void advance() {
    if (!at_end() && m_text[m_pos++] == '\n')
      ++m_line;
  }
  void skip_space() {
    while (!at_end() && llvm::StringRef(" \t\r\n").contains(peek()))
      advance();
  }

  std::string string() {
    std::string out;
    advance(); // the opening quote
    while (!at_end() && peek() != '"') {
      if (peek() == '\\')
        advance();
      out.push_back(peek());
      advance();
    }
    advance();
    return out;
  }

  void value(const std::string& path, int depth) {
    skip_space();
    m_lines.try_emplace(path, m_line);
    if (depth > k_max_depth || at_end())
      return;
    if (peek() == '{')
      return members(path, depth);
    if (peek() == '[')
      return elements(path, depth);
    if (peek() == '"') {
      string();
      return;
    }
    while (!at_end() && !llvm::StringRef(",]} \t\r\n").contains(peek()))
      advance();
  }

  void members(const std::string& path, int depth) {
    advance();
    std::set<std::string> keys;
    for (skip_space(); !at_end() && peek() != '}'; skip_space()) {
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() != '"')
        return; // not valid JSON; parse() reports it
      unsigned key_line = m_line;
      std::string key = string();
      if (!keys.insert(key).second && !m_duplicate)
        m_duplicate.emplace(child_path(path, key), key_line);
      m_lines[child_path(path, key)] = key_line;
      skip_space();
      advance(); // ':'
      value(child_path(path, key), depth + 1);
      m_lines[child_path(path, key)] = key_line;
    }
    advance();
  }

  void elements(const std::string& path, int depth) {
    advance();
    size_t index = 0;
    for (skip_space(); !at_end() && peek() != ']'; skip_space()) {
      if (peek() == ',') {
        advance();
        continue;
      }
      value(element_path(path, index++), depth + 1);
    }
    advance();
  }

  llvm::StringRef m_text;
  std::map<std::string, unsigned>& m_lines;
  size_t m_pos = 0;
  unsigned m_line = 1;
  std::optional<std::pair<std::string, unsigned>> m_duplicate;
};

} // namespace

std::map<std::string, unsigned> field_lines(llvm::StringRef text) {
  std::map<std::string, unsigned> lines;
  LineScanner(text, lines).scan();
  return lines;
}

llvm::Error check_duplicate_keys(llvm::StringRef text, llvm::StringRef file_name) {
  std::map<std::string, unsigned> lines;
  LineScanner scanner(text, lines);
  scanner.scan();
  if (const auto& duplicate = scanner.duplicate())
    return make_error(Errc::invalid_argument,
                      "{}:{}: field '{}': duplicate key; each key may appear once per object",
                      file_name.str(), duplicate->second, duplicate->first);
  return llvm::Error::success();
}

llvm::Error check_depth(llvm::StringRef text, llvm::StringRef file_name) {
  int depth = 0;
  unsigned line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n')
      ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[') && ++depth > k_max_depth) {
      return make_error(Errc::invalid_argument, "{}:{}: nested deeper than {} levels",
                        file_name.str(), line, k_max_depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return llvm::Error::success();
}

// llvm::json::ParseError prints "[LINE:COLUMN, byte=N]: MESSAGE"; its fields are private.
llvm::Error syntax_error(llvm::Error cause, llvm::StringRef file_name) {
  const std::string text = llvm::toString(std::move(cause));
  llvm::StringRef rest(text);
  unsigned line = 0, column = 0, byte = 0; // consumeInteger returns true when it fails
  if (rest.consume_front("[") && !rest.consumeInteger(10, line) && rest.consume_front(":") &&
      !rest.consumeInteger(10, column) && rest.consume_front(", byte=") &&
      !rest.consumeInteger(10, byte) && rest.consume_front("]: "))
    return make_error(Errc::invalid_argument, "{}:{}:{}: invalid JSON: {}", file_name.str(), line,
                      column, rest.str());
  return make_error(Errc::invalid_argument, "{}: invalid JSON: {}", file_name.str(), text);
}

} // namespace specjit::deploy
