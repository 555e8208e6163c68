#include "runtime/event_log.h"

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

// The "ms" of every event in the log's kept files, oldest file first (as its readers take them);
// a line that does not parse fails the test.
std::vector<double> logged_ms(const std::string& path) {
  std::vector<double> ms;
  for (const std::string& file : rotated_log_paths(path))
    if (llvm::sys::fs::exists(file))
      for (const llvm::json::Object& event : test::read_json_lines(file))
        ms.push_back(event.getNumber("ms").getValueOr(-1));
  return ms;
}
} // namespace

TEST_CASE("rotated log names keep the extension and come oldest first") {
  CHECK(rotated_log_path("/c/logs/events.jsonl", 1) == "/c/logs/events.1.jsonl");
  CHECK(rotated_log_path("/c/log", 2) == "/c/log.2");
  CHECK(rotated_log_paths("/c/events.jsonl") ==
        std::vector<std::string>{"/c/events.2.jsonl", "/c/events.1.jsonl", "/c/events.jsonl"});
}

TEST_CASE("the log rotates past its size limit and keeps its files in order") {
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
  const std::vector<double> order = logged_ms(path);
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
  const std::vector<double> seen = logged_ms(path);
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
