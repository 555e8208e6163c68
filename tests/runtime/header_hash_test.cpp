// Hashing one opened header: the digest of its bytes whatever their size (one read or many),
// its status taken with them, nothing for what is not a regular file, and whether its file
// system keeps ctime (procfs does not). No NVRTC, no GPU.
#include "runtime/header_hash.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

HashedFile hash_file(FileHasher& hasher, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  HashedFile hashed = hasher.hash(fd);
  if (fd >= 0)
    ::close(fd);
  return hashed;
}

} // namespace

TEST_CASE("a header's digest is that of its bytes, from one read or from many") {
  TempDir dir;
  FileHasher hasher;
  for (size_t size : {size_t{0}, size_t{1}, FileHasher::k_read_chunk - 1, FileHasher::k_read_chunk,
                      FileHasher::k_read_chunk + 1, 5 * FileHasher::k_read_chunk + 17}) {
    std::string bytes;
    for (size_t i = 0; i < size; ++i)
      bytes.push_back(static_cast<char>((i * 131) ^ (i >> 7)));
    std::string path = dir / ("h" + std::to_string(size) + ".h");
    test::write_file(path, bytes);
    HashedFile hashed = hash_file(hasher, path);
    REQUIRE_MESSAGE(hashed.digest.has_value(), size);
    CHECK_MESSAGE(*hashed.digest == hash128(bytes), size);
    CHECK(static_cast<size_t>(hashed.status.st_size) == size);
  }
}

TEST_CASE("a directory, a FIFO or nothing at all has no digest") {
  TempDir dir;
  FileHasher hasher;
  CHECK_FALSE(hash_file(hasher, dir.path()).digest.has_value());
  REQUIRE(::mkfifo((dir / "fifo.h").c_str(), 0600) == 0);
  CHECK_FALSE(hash_file(hasher, dir / "fifo.h").digest.has_value());
  CHECK_FALSE(hasher.hash(-1).digest.has_value());
}

TEST_CASE("a file system whose ctime the kernel does not keep is never one to hint on") {
  FileHasher hasher;
  HashedFile proc = hash_file(hasher, "/proc/self/status");
  if (!proc.digest) {
    MESSAGE("SKIPPED: no /proc here");
    return;
  }
  CHECK_FALSE(proc.keeps_change_time);
  if (::access("/dev/shm", W_OK) == 0) {
    std::string path = "/dev/shm/specjit-header-hash-test-" + std::to_string(::getpid());
    test::write_file(path, "#define X 1\n");
    HashedFile shm = hash_file(hasher, path);
    ::unlink(path.c_str());
    CHECK(shm.keeps_change_time); // tmpfs
  }
}
