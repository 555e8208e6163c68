// DiskStore::open_log_for_append: the log's file in <root>/logs/ is never opened through a
// link or in a directory another user could write, and a refused root gets nothing created.
#include "cache/disk_store.h"

#include "store_test_support.h"

#include "support/error.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

// The message of the error open_log_for_append returned; fails the test when it succeeded.
std::string refusal(DiskStore& store) {
  llvm::Expected<int> fd = store.open_log_for_append("events.jsonl");
  if (fd) {
    ::close(*fd);
    FAIL("the log was opened");
  }
  return summarize(fd.takeError()).message;
}

} // namespace

TEST_CASE("the log is created 0600 in a 0700 logs directory and appended to") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  for (const char* line : {"one\n", "two\n"}) {
    llvm::Expected<int> fd = store.open_log_for_append("events.jsonl");
    REQUIRE_MESSAGE(static_cast<bool>(fd), llvm::toString(fd.takeError()));
    REQUIRE(::write(*fd, line, 4) == 4);
    ::close(*fd);
  }
  std::string path = dir / "cache/logs/events.jsonl";
  CHECK(read_file(path) == "one\ntwo\n");
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(lstat((dir / "cache/logs").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("a link planted as logs/ or as the log file is never written through") {
  TempDir dir;
  std::string root = dir / "cache", target = dir / "victim";
  write_file(target, "precious\n");
  int64_t target_mtime = mtime_ns(target);
  REQUIRE(mkdir(root.c_str(), 0755) == 0);
  REQUIRE(mkdir((dir / "elsewhere").c_str(), 0755) == 0);

  REQUIRE(symlink((dir / "elsewhere").c_str(), (root + "/logs").c_str()) == 0);
  DiskStore store(options_for(root));
  CHECK(refusal(store).find("symbolic links are not followed") != std::string::npos);
  CHECK(files_in(dir / "elsewhere").empty());

  REQUIRE(unlink((root + "/logs").c_str()) == 0);
  REQUIRE(mkdir((root + "/logs").c_str(), 0700) == 0);
  REQUIRE(symlink(target.c_str(), (root + "/logs/events.jsonl").c_str()) == 0);
  CHECK(refusal(store).find("is a symbolic link") != std::string::npos);
  CHECK(read_file(target) == "precious\n");
  CHECK(mtime_ns(target) == target_mtime);
}

TEST_CASE("a FIFO, a hard link or a group-writable logs directory is refused") {
  TempDir dir;
  std::string root = dir / "cache";
  REQUIRE(mkdir(root.c_str(), 0755) == 0);
  REQUIRE(mkdir((root + "/logs").c_str(), 0700) == 0);
  DiskStore store(options_for(root));
  REQUIRE(mkfifo((root + "/logs/events.jsonl").c_str(), 0600) == 0);
  CHECK(refusal(store).find("not a regular file") != std::string::npos);
  REQUIRE(unlink((root + "/logs/events.jsonl").c_str()) == 0);

  write_file(dir / "other", "x");
  REQUIRE(link((dir / "other").c_str(), (root + "/logs/events.jsonl").c_str()) == 0);
  CHECK(refusal(store).find("hard links") != std::string::npos);
  CHECK(read_file(dir / "other") == "x");
  REQUIRE(unlink((root + "/logs/events.jsonl").c_str()) == 0);

  REQUIRE(chmod((root + "/logs").c_str(), 0770) == 0);
  CHECK(refusal(store).find("group-writable") != std::string::npos);
}

TEST_CASE("a refused root gets no logs directory and no log file") {
  TempDir dir;
  std::string root = dir / "cache";
  REQUIRE(mkdir(root.c_str(), 0777) == 0);
  REQUIRE(chmod(root.c_str(), 0777) == 0);
  DiskStore store(options_for(root));
  REQUIRE(store.root_state() == RootState::refused);
  CHECK(refusal(store).find("world-writable") != std::string::npos);
  CHECK(snapshot(root).empty());
}

TEST_CASE("a log name with a slash is refused") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  llvm::Expected<int> fd = store.open_log_for_append("../escape");
  REQUIRE(!fd);
  CHECK(summarize(fd.takeError()).code == Errc::invalid_argument);
  CHECK(!exists(dir / "escape"));
}
