#include "deploy/log_reader.h"

#include "test_support.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::deploy;

TEST_CASE("a log reads back into typed events, skipping and counting bad lines") {
  std::string text =
      R"({"v":1,"ts":"2026-11-29T16:26:23.123456Z","pid":7,"event":"compile","kernel":"scale_tokens","variant":{"cols":128,"num_tokens":62},"key":"ab","ms":120.5,"arch":"sm_90a","nvrtc":"13.0","reason":"new_variant","diff":[{"component":"num_tokens","cached":"61","requested":"62","policy":"exact"}],"phase":"serving"})"
      "\n"
      "not json\n"
      "\n"
      R"({"v":1,"ts":"2026-11-29T16:27:00Z","pid":7,"event":"disk_hit","kernel":"scale_tokens","variant":{"cols":128,"num_tokens":"dynamic"},"key":"cd","ms":1.5,"layer":0})"
      "\n"
      R"({"v":1,"event":"storm","kernel":"scale_tokens","param":"num_tokens","distinct_values":9})"
      "\n"
      R"({"no_event":1})"
      "\n"
      R"({"v":1,"event":"compile","kernel":"x","ms":1})"; // half-written last line: still whole
  LogContents log = parse_log(text);
  CHECK(log.lines == 6);
  CHECK(log.bad_lines == 2);
  CHECK(log.bad_line_numbers == std::vector<size_t>{2, 6});
  REQUIRE(log.events.size() == 4);
  const LogEvent& compile = log.events[0];
  CHECK(compile.kind == EventKind::compile);
  CHECK(compile.line == 1);
  CHECK(compile.pid == 7);
  CHECK(compile.ms == doctest::Approx(120.5));
  CHECK(compile.phase == "serving");
  CHECK(compile.reason == "new_variant");
  REQUIRE(compile.diff.size() == 1);
  CHECK(compile.diff[0].component == "num_tokens");
  CHECK(compile.diff[0].policy == "exact");
  CHECK(describe_variant(compile.variant) == "cols=128, num_tokens=62");
  CHECK(compile.ts_micros.has_value());
  const LogEvent& hit = log.events[1];
  CHECK(hit.kind == EventKind::disk_hit);
  CHECK(hit.layer == "0");
  CHECK(describe_variant(hit.variant) == "cols=128, num_tokens=dynamic");
  CHECK(*hit.ts_micros - *compile.ts_micros == 36'876'544);
  CHECK(log.events[2].kind == EventKind::storm);
  CHECK(log.events[2].distinct_values == 9);
}

TEST_CASE("UTC time stamps parse to microseconds since the epoch") {
  CHECK(parse_utc_timestamp("1970-01-01T00:00:00Z") == 0);
  CHECK(parse_utc_timestamp("1970-01-02T00:00:01.5Z") == 86'401'500'000);
  CHECK(parse_utc_timestamp("2000-03-01T00:00:00Z") == int64_t{951868800} * 1'000'000);
  CHECK(parse_utc_timestamp("2000-03-01") == int64_t{951868800} * 1'000'000);
  CHECK_FALSE(parse_utc_timestamp("yesterday").has_value());
  CHECK_FALSE(parse_utc_timestamp("2000-13-01T00:00:00Z").has_value());
  CHECK_FALSE(parse_utc_timestamp("2000-01-01T00:00:00+02:00").has_value());
}

TEST_CASE("an unknown event is kept with kind other") {
  LogContents log = parse_log(R"({"event":"future_thing","kernel":"k"})");
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].kind == EventKind::other);
  CHECK(log.events[0].event == "future_thing");
}

TEST_CASE("a missing rotated file is skipped; a missing log is an error naming it") {
  test::TempDir dir;
  test::write_file(dir / "events.1.jsonl", "{\"event\":\"compile\",\"kernel\":\"a\"}\n");
  test::write_file(dir / "events.jsonl", "{\"event\":\"compile\",\"kernel\":\"b\"}\n");
  std::string kernels;
  auto scan = scan_log(dir / "events.jsonl",
                       [&](LogEvent&& event, llvm::StringRef) { kernels += event.kernel; });
  REQUIRE(static_cast<bool>(scan));
  CHECK(kernels == "ab");
  auto missing = scan_log(dir / "nope.jsonl", [](LogEvent&&, llvm::StringRef) {});
  REQUIRE_FALSE(static_cast<bool>(missing));
  CHECK(llvm::toString(missing.takeError()).find(dir / "nope.jsonl") != std::string::npos);
}
