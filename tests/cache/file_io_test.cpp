#include "cache/file_io.h"

#include "store_test_support.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <fcntl.h>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;
using specjit::test::write_file;

TEST_CASE("fault injection is off by default and turned off by an empty injector") {
  TempDir dir;
  UniqueFd fd;
  CHECK(create_exclusive(dir / "a", 0644, fd) == 0);
  {
    InjectorGuard guard([](IoOp op, llvm::StringRef path) {
      return op == IoOp::write && path.endswith("/a") ? ENOSPC : 0;
    });
    CHECK(write_all(fd.get(), dir / "a", "hello") == ENOSPC);
    CHECK(write_all(fd.get(), dir / "b", "hello") == 0); // only the path it names
  }
  CHECK(write_all(fd.get(), dir / "a", " world") == 0);
  CHECK(close_file(fd, dir / "a") == 0);
  CHECK(read_file(dir / "a") == "hello world");
}

TEST_CASE("short writes are completed") {
  TempDir dir;
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(i * 7);
  UniqueFd fd;
  REQUIRE(create_exclusive(dir / "a", 0644, fd) == 0);
  int calls = 0;
  {
    InjectorGuard guard([&](IoOp op, llvm::StringRef) {
      calls += op == IoOp::write;
      return op == IoOp::write ? k_inject_short_write : 0;
    });
    CHECK(write_all(fd.get(), dir / "a", data) == 0);
  }
  CHECK(calls > 10);
  fd.reset();
  CHECK(read_file(dir / "a") == data);
}

TEST_CASE("files are opened without following links and closed on exec") {
  TempDir dir;
  write_file(dir / "target", "secret");
  REQUIRE(symlink((dir / "target").c_str(), (dir / "link").c_str()) == 0);
  UniqueFd fd;
  CHECK(open_for_read(dir / "link", fd) == ELOOP);
  CHECK(create_exclusive(dir / "link", 0644, fd) == EEXIST);
  CHECK(open_lock_file(dir / "link", fd) == ELOOP);
  CHECK(read_file(dir / "target") == "secret");

  REQUIRE(mkdir((dir / "real").c_str(), 0755) == 0);
  REQUIRE(symlink((dir / "real").c_str(), (dir / "dirlink").c_str()) == 0);
  std::vector<std::string> names;
  CHECK(list_directory(dir / "dirlink", names) != 0);
  CHECK(open_directory(dir / "dirlink", fd) != 0);
  CHECK(list_directory(dir / "real", names) == 0);
  CHECK(names.empty());

  REQUIRE(open_for_read(dir / "target", fd) == 0);
  CHECK((fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
  char buffer[16];
  size_t got = 0;
  CHECK(read_up_to(fd.get(), dir / "target", buffer, sizeof buffer, got) == 0);
  CHECK(std::string(buffer, got) == "secret");
}

TEST_CASE("io_error names the operation, the path and the errno text") {
  ErrorSummary summary = summarize(io_error(IoOp::write, "/x/y.tmp", ENOSPC));
  CHECK(summary.code == Errc::io);
  CHECK(summary.message == "cannot write '/x/y.tmp': No space left on device");
}
