#include "runtime/log_line.h"

#include <doctest/doctest.h>

#include <map>

using namespace specjit::runtime;

namespace {
std::map<std::string, std::string> members(llvm::StringRef line, bool& ok) {
  std::map<std::string, std::string> out;
  ok = scan_json_members(line, [&](llvm::StringRef key, const JsonSpan& value) {
    out[key.str()] = value.kind == JsonSpan::Kind::string ? decoded_string(value) : value.raw.str();
  });
  return out;
}
} // namespace

TEST_CASE("the members of a log line come back as spans, nested values whole") {
  bool ok = false;
  auto m = members(R"( {"event":"compile", "ms": 12.5,"variant":{"a":[1,"}"]},"ok":true,)"
                   R"("log":"a \"quoted\" \\ line\n"} )",
                   ok);
  REQUIRE(ok);
  CHECK(m["event"] == "compile");
  CHECK(m["ms"] == "12.5");
  CHECK(m["variant"] == R"({"a":[1,"}"]})");
  CHECK(m["ok"] == "true");
  CHECK(m["log"] == "a \"quoted\" \\ line\n");
}

TEST_CASE("lines that are not one well-formed object are refused") {
  for (const char* line : {"", "not json", "[1]", R"({"event":"compile")", R"({"event":"co)",
                           R"({"a":1,})", R"({"a" 1})", R"({"a":{"b":1})", R"({"a":1} x)",
                           R"({"a":1.2.3})", R"({"a":tru})", "{\"a\":\"\x01\"}"}) {
    CAPTURE(line);
    bool ok = true;
    members(line, ok);
    CHECK_FALSE(ok);
  }
  bool ok = false;
  CHECK(members("{}", ok).empty());
  CHECK(ok);
}

TEST_CASE("number spans read as doubles and integers") {
  JsonSpan number{JsonSpan::Kind::number, "-3", false};
  CHECK(span_integer(number) == -3);
  CHECK(span_number(number) == -3.0);
  JsonSpan fraction{JsonSpan::Kind::number, "2.5e1", false};
  CHECK(span_number(fraction) == 25.0);
  CHECK_FALSE(span_integer(fraction).has_value());
  JsonSpan text{JsonSpan::Kind::string, "7", false};
  CHECK_FALSE(span_number(text).has_value());
}
