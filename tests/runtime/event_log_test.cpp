#include "runtime/event_log.h"
#include "runtime/log_reader.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>

#include <unistd.h>

using namespace specjit;
using namespace specjit::runtime;

namespace {
void write_events(EventLog& log, int first, int count) {
  for (int i = first; i < first + count; ++i)
    log.write(llvm::json::Object{{"event", "compile"},
                                 {"kernel", "scale_tokens"},
                                 {"ms", static_cast<double>(i)},
                                 {"detail", std::string(60, 'x')}});
}

uint64_t size_of(const std::string& path) {
  uint64_t size = 0;
  return llvm::sys::fs::file_size(path, size) ? 0 : size;
}
} // namespace

TEST_CASE("rotated log names keep the extension and come oldest first") {
  CHECK(rotated_log_path("/c/logs/events.jsonl", 1) == "/c/logs/events.1.jsonl");
  CHECK(rotated_log_path("/c/log", 2) == "/c/log.2");
  CHECK(rotated_log_paths("/c/events.jsonl") ==
        std::vector<std::string>{"/c/events.2.jsonl", "/c/events.1.jsonl", "/c/events.jsonl"});
}

TEST_CASE("the log rotates past its size limit and the reader reads the kept files in order") {
  test::TempDir dir;
  const std::string path = dir / "logs/events.jsonl";
  const uint64_t limit = 64 << 10;
  {
    EventLog log(path, limit);
    write_events(log, 0, 3000); // about 5x the limit
  }
  for (const std::string& file : rotated_log_paths(path)) {
    INFO(file);
    CHECK(size_of(file) > 0);
    CHECK(size_of(file) < limit + 512); // at most one line past the limit
  }
  CHECK_FALSE(llvm::sys::fs::exists(rotated_log_path(path, 3)));
  std::vector<double> order;
  auto scan = scan_log(path, [&](LogEvent&& event, llvm::StringRef) { order.push_back(event.ms); });
  REQUIRE(static_cast<bool>(scan));
  CHECK(scan->files.size() == 3);
  CHECK(scan->bad_lines == 0);
  REQUIRE(order.size() > 600); // three files of 64 KiB
  CHECK(order.back() == 2999); // the newest event is last
  for (size_t i = 1; i < order.size(); ++i)
    REQUIRE(order[i] == order[i - 1] + 1); // oldest first, nothing lost within the kept files
}

TEST_CASE("a second process's log object finds the rotated file and reopens") {
  test::TempDir dir;
  const std::string path = dir / "events.jsonl";
  EventLog first(path, 64 << 10), second(path, 64 << 10);
  write_events(first, 0, 10);
  write_events(second, 10, 10);
  write_events(first, 20, 1500); // rotates
  write_events(second, 1520, 1500);
  std::vector<double> seen;
  auto scan = scan_log(path, [&](LogEvent&& event, llvm::StringRef) { seen.push_back(event.ms); });
  REQUIRE(static_cast<bool>(scan));
  CHECK(scan->bad_lines == 0);
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back() == 3019);
  CHECK(size_of(path) < (64 << 10) + 512);
}

TEST_CASE("the log is never written through a symlink at its path") {
  test::TempDir dir;
  test::write_file(dir / "victim", "precious\n");
  REQUIRE(symlink((dir / "victim").c_str(), (dir / "events.jsonl").c_str()) == 0);
  {
    EventLog log(dir / "events.jsonl");
    write_events(log, 0, 3);
  }
  CHECK(test::read_file(dir / "victim") == "precious\n");
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
