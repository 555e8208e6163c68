#include "support/bounded_file.h"

#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

using namespace specjit;

namespace {
std::string message_of(llvm::Error error) { return summarize(std::move(error)).message; }

std::vector<std::string> lines_of(const std::string& path, size_t max_line) {
  auto file = RegularFile::open(path, "log", 1 << 20);
  REQUIRE(static_cast<bool>(file));
  LineReader reader(std::move(*file), max_line);
  std::vector<std::string> lines;
  llvm::StringRef line;
  while (reader.next(line))
    lines.push_back(line.str());
  CHECK_FALSE(static_cast<bool>(reader.take_error()));
  return lines;
}
} // namespace

TEST_CASE("a regular file within its limit reads whole") {
  test::TempDir dir;
  test::write_file(dir / "m.json", "{\"version\": 1}\n");
  auto text = read_regular_file(dir / "m.json", "manifest", 1024);
  REQUIRE(static_cast<bool>(text));
  CHECK(*text == "{\"version\": 1}\n");
}

TEST_CASE("a file past the limit is refused with its size and the limit") {
  test::TempDir dir;
  test::write_file(dir / "big", std::string(2000, 'x'));
  auto text = read_regular_file(dir / "big", "manifest", 1000);
  REQUIRE_FALSE(static_cast<bool>(text));
  std::string message = message_of(text.takeError());
  CHECK(message.find("manifest " + dir / "big") != std::string::npos);
  CHECK(message.find("2000 bytes; the limit is 1000 bytes") != std::string::npos);
}

TEST_CASE("a device, a directory and a FIFO are refused by name, without blocking") {
  test::TempDir dir;
  REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  for (auto [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "a character device"}, {dir.path(), "a directory"},
           {dir / "fifo", "a FIFO"}}) {
    auto text = read_regular_file(path, "log", 1 << 20);
    REQUIRE_FALSE(static_cast<bool>(text));
    std::string message = message_of(text.takeError());
    INFO(message);
    CHECK(message.find(path + " is " + kind + "; only regular files are read") !=
          std::string::npos);
  }
  // No writer ever opens the FIFO: a blocking open would hang here.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("a missing file is not_found and names the path") {
  auto text = read_regular_file("/nonexistent/m.json", "manifest", 10);
  REQUIRE_FALSE(static_cast<bool>(text));
  ErrorSummary summary = summarize(text.takeError());
  CHECK(summary.code == Errc::not_found);
  CHECK(summary.message.find("/nonexistent/m.json") != std::string::npos);
}

TEST_CASE("the line reader hands over every line, the last one without a newline too") {
  test::TempDir dir;
  test::write_file(dir / "log", "one\ntwo\n\nthree");
  CHECK(lines_of(dir / "log", 64) == std::vector<std::string>{"one", "two", "", "three"});
}

TEST_CASE("a line longer than the buffer is handed over cut, and the next line is whole") {
  test::TempDir dir;
  std::string text = "short\n" + std::string(100, 'a') + "\nafter\n" + std::string(40, 'b');
  test::write_file(dir / "log", text);
  std::vector<std::string> lines = lines_of(dir / "log", 32);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "short");
  CHECK(lines[1] == std::string(32, 'a'));
  CHECK(lines[2] == "after");
  CHECK(lines[3] == std::string(32, 'b'));
}

TEST_CASE("lines crossing buffer refills come back intact") {
  test::TempDir dir;
  std::string text;
  std::vector<std::string> expected;
  for (int i = 0; i < 500; ++i) {
    expected.push_back("line " + std::to_string(i) + std::string(i % 13, '.'));
    text += expected.back() + "\n";
  }
  test::write_file(dir / "log", text);
  CHECK(lines_of(dir / "log", 40) == expected);
}
