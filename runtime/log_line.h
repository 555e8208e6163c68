// One line of the recompilation log, read fast: the top-level members of a JSON object as raw
// spans, without building a JSON tree. `specjit log` reads 10^6 lines in seconds this way;
// llvm::json::parse of every line took ten times as long. Nested values the reader uses
// (variant, diff) are parsed with llvm::json from their span; others are only checked for
// balanced brackets and terminated strings.
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>

#include <optional>
#include <string>

namespace specjit::runtime {

struct JsonSpan {
  enum class Kind { string, number, object, array, literal };
  Kind kind = Kind::literal;
  llvm::StringRef raw;      // the value's text; for a string, without the quotes
  bool escaped = false;     // a string with backslash escapes (decode with decoded_string)
};

// Calls `member` for each top-level member of the object on `line`; false when the line is not
// one well-formed JSON object (then members already reported must be ignored).
bool scan_json_members(llvm::StringRef line,
                       llvm::function_ref<void(llvm::StringRef key, const JsonSpan& value)> member);

// A string span's value, escapes decoded.
std::string decoded_string(const JsonSpan& span);
// A number span's value; nullopt when it is not a number (or not an integer).
std::optional<double> span_number(const JsonSpan& span);
std::optional<int64_t> span_integer(const JsonSpan& span);

} // namespace specjit::runtime
