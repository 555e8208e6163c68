// H1 (unsafe roots), H2 (symbolic links), D2 (unwritable roots) and D1 on a real full disk.
#include "cache/disk_store.h"

#include "store_test_support.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

void make_dir(const std::string& path, mode_t mode = 0755) {
  REQUIRE(mkdir(path.c_str(), mode) == 0);
  REQUIRE(chmod(path.c_str(), mode) == 0); // mkdir applies the umask
}

// A root holding one published entry, written by a store that is then gone.
SampleEntry root_with_entry(const std::string& root) {
  DiskStore builder(options_for(root));
  return publish_sample(builder, "k", 1);
}

void check_not_written(DiskStore& store, const SampleEntry& entry) {
  CHECK(!store.writable());
  CHECK(!store.unusable_reason().empty());
  llvm::Error error = store.publish(entry.key, "k", entry.bytes);
  REQUIRE(static_cast<bool>(error));
  CHECK(summarize(std::move(error)).message.find("not writable") != std::string::npos);
  CHECK(!store.lock_for_compile(entry.key).acquired());
  CHECK(store.clear().removed == 0);
  CHECK(store.sweep_stale_temps() == 0);
  CHECK(store.prune(0).removed == 0);
}

} // namespace

TEST_CASE("a root below a regular file degrades: not writable, publish fails cleanly (D2)") {
  TempDir dir;
  write_file(dir / "file", "x");
  SampleEntry layer_entry = root_with_entry(dir / "base");
  DiskStore store(options_for(dir / "file/cache", {dir / "base"}));
  CHECK(store.root_state() == RootState::read_only);
  CHECK(store.unusable_reason().find("Not a directory") != std::string::npos);
  check_not_written(store, layer_entry);
  // Layers are still read.
  LookupResult result = store.lookup(layer_entry.key, "k");
  REQUIRE(result.hit);
  CHECK(result.hit->location.layer == 1);
}

TEST_CASE("a read-only root still serves hits and is never written (D2, injected EROFS)") {
  TempDir dir;
  SampleEntry entry = root_with_entry(dir / "cache");
  std::string path = DiskStore(options_for(dir / "cache")).entry_path(entry.key, "k");
  set_mtime(path, 7200);
  Snapshot before = snapshot(dir / "cache");
  std::unique_ptr<DiskStore> store;
  {
    InjectorGuard guard([](IoOp op, llvm::StringRef) { return op == IoOp::access ? EROFS : 0; });
    store = std::make_unique<DiskStore>(options_for(dir / "cache"));
  }
  CHECK(store->root_state() == RootState::read_only);
  CHECK(store->unusable_reason().find("Read-only file system") != std::string::npos);
  LookupResult result = store->lookup(entry.key, "k");
  REQUIRE(result.hit);
  CHECK(result.hit->location.layer == 0);
  check_not_written(*store, entry);
  // A corrupt entry in an unwritable root is reported but stays where it is.
  std::string bad = entry.bytes;
  bad.back() ^= 1;
  write_file(path, bad);
  set_mtime(path, 7200);
  before = snapshot(dir / "cache");
  result = store->lookup(entry.key, "k");
  CHECK(!result.hit);
  REQUIRE(result.corrupt.size() == 1);
  CHECK(!result.corrupt[0].moved_aside);
  CHECK(store->verify(true).size() == 1);
  CHECK(snapshot(dir / "cache") == before);
}

TEST_CASE("a world-writable root without the sticky bit is refused, never read (H1)") {
  TempDir dir;
  SampleEntry entry = root_with_entry(dir / "cache");
  REQUIRE(chmod((dir / "cache").c_str(), 0777) == 0);
  Snapshot before = snapshot(dir / "cache");
  DiskStore store(options_for(dir / "cache"));
  CHECK(store.root_state() == RootState::refused);
  CHECK(!store.root_readable());
  CHECK(store.unusable_reason().find("world-writable") != std::string::npos);
  CHECK(!store.lookup(entry.key, "k").hit); // the entry is there, but not trusted
  CHECK(store.list().empty());
  CHECK(store.verify(true).empty());
  check_not_written(store, entry);
  CHECK(snapshot(dir / "cache") == before);

  // The same with the sticky bit (like /tmp) is fine.
  REQUIRE(chmod((dir / "cache").c_str(), 01777) == 0);
  DiskStore sticky(options_for(dir / "cache"));
  CHECK(sticky.writable());
  CHECK(sticky.lookup(entry.key, "k").hit);
}

TEST_CASE("a world-writable v1 directory is refused too (H1)") {
  TempDir dir;
  SampleEntry entry = root_with_entry(dir / "cache");
  REQUIRE(chmod((dir / "cache/v1").c_str(), 0777) == 0);
  DiskStore store(options_for(dir / "cache"));
  CHECK(store.root_state() == RootState::refused);
  CHECK(!store.lookup(entry.key, "k").hit);
}

TEST_CASE("a root owned by another user is refused (H1)") {
  if (geteuid() != 0) {
    MESSAGE("[cache] SKIPPED root owned by another user: needs root to chown");
    return;
  }
  TempDir dir;
  SampleEntry entry = root_with_entry(dir / "cache");
  REQUIRE(chown((dir / "cache").c_str(), 12345, 12345) == 0);
  DiskStore store(options_for(dir / "cache"));
  CHECK(store.root_state() == RootState::refused);
  CHECK(store.unusable_reason().find("owned by uid 12345") != std::string::npos);
  CHECK(!store.lookup(entry.key, "k").hit);
  check_not_written(store, entry);
}

TEST_CASE("an empty root is refused rather than resolved against the working directory") {
  DiskStore store(options_for(""));
  CHECK(store.root_state() == RootState::refused);
  CHECK(!store.writable());
  CHECK(!store.lookup(sample_entry().key, "k").hit);
}

TEST_CASE("a symbolic link planted as an entry is never followed (H2)") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  publish_sample(store, "k", 1); // creates the directories
  // The link points at a perfectly valid entry of the same key: still not followed.
  SampleEntry entry = sample_entry("k", 2);
  write_file(dir / "target", entry.bytes);
  set_mtime(dir / "target", 7200);
  Snapshot target_before = snapshot(dir.path());
  std::string path = store.entry_path(entry.key, "k");
  REQUIRE(symlink((dir / "target").c_str(), path.c_str()) == 0);

  LookupResult result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  CHECK(store.list(llvm::StringRef("k")).size() == 1); // only the real entry
  store.verify(true);
  store.prune(0);
  CHECK(read_file(dir / "target") == entry.bytes);
  CHECK(mtime_ns(dir / "target") == target_before[dir / "target"].mtime_ns);

  // Publishing replaces the link itself, never the file it points to.
  publish_sample(store, "k", 2);
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(store.lookup(entry.key, "k").hit);
  CHECK(mtime_ns(dir / "target") == target_before[dir / "target"].mtime_ns);
}

TEST_CASE(
    "a symbolic link planted as the temp or entries directory is never written through (H2)") {
  for (std::string planted : {"tmp", "entries"}) {
    CAPTURE(planted);
    TempDir dir;
    make_dir(dir / "elsewhere");
    make_dir(dir / "cache");
    make_dir(dir / "cache/v1");
    if (planted != "entries")
      make_dir(dir / "cache/v1/entries");
    std::string link = dir / ("cache/v1/" + planted);
    REQUIRE(symlink((dir / "elsewhere").c_str(), link.c_str()) == 0);
    DiskStore store(options_for(dir / "cache"));
    SampleEntry entry = sample_entry("k", 1);
    llvm::Error error = store.publish(entry.key, "k", entry.bytes);
    REQUIRE(static_cast<bool>(error));
    CHECK(summarize(std::move(error)).message.find("symbolic links are not followed") !=
          std::string::npos);
    CHECK(files_in(dir / "elsewhere").empty());
    CHECK(snapshot(dir / "elsewhere").empty());
    CHECK(!store.lookup(entry.key, "k").hit);
  }
}

TEST_CASE("a symbolic link planted as a kernel directory is moved aside, never written through") {
  TempDir dir;
  make_dir(dir / "elsewhere");
  make_dir(dir / "cache");
  make_dir(dir / "cache/v1");
  make_dir(dir / "cache/v1/entries");
  REQUIRE(symlink((dir / "elsewhere").c_str(), (dir / "cache/v1/entries/k").c_str()) == 0);
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry("k", 1);
  LookupResult miss = store.lookup(entry.key, "k");
  CHECK(!miss.hit);
  REQUIRE(miss.corrupt.size() == 1);
  CHECK(miss.corrupt[0].fault == EntryFault::not_a_file);
  CHECK(miss.corrupt[0].moved_aside);
  llvm::Error error = store.publish(entry.key, "k", entry.bytes);
  REQUIRE_MESSAGE(!error, llvm::toString(std::move(error)));
  CHECK(snapshot(dir / "elsewhere").empty());
  struct stat st;
  REQUIRE(lstat((dir / "cache/v1/entries/k").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(store.lookup(entry.key, "k").hit);
  CHECK(files_in(dir / "cache/v1/corrupt").size() == 1); // the link itself, as it was
}

TEST_CASE("a FIFO planted as an entry does not hang the reader") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  publish_sample(store, "k", 1);
  SampleEntry entry = sample_entry("k", 2);
  REQUIRE(mkfifo(store.entry_path(entry.key, "k").c_str(), 0644) == 0);
  CHECK(!store.lookup(entry.key, "k").hit);
  CHECK(store.list().size() == 1);
}

namespace {

// Runs `body` with a private mount namespace (test_support.h). Returns false (after printing
// why) when this machine does not allow it.
bool in_private_mount_namespace(const char* test, const std::function<int()>& body) {
  int code = specjit::test::in_private_mount_namespace(body);
  if (code == specjit::test::k_no_mount_namespace) {
    MESSAGE("[cache] SKIPPED " << test << ": mount namespaces are not available here");
    return false;
  }
  CHECK_MESSAGE(code == 0, "failed check number " << code);
  return true;
}

} // namespace

TEST_CASE("a read-only bind-mounted root is read and never written (D2, real EROFS)") {
  TempDir dir;
  SampleEntry entry = root_with_entry(dir / "cache");
  Snapshot before = snapshot(dir / "cache");
  std::string root = dir / "cache";
  in_private_mount_namespace("read-only bind mount", [&]() -> int {
    if (mount(root.c_str(), root.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, root.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return 77;
    DiskStore store(options_for(root));
    if (store.root_state() != RootState::read_only)
      return 1;
    if (!store.lookup(entry.key, "k").hit)
      return 2;
    llvm::Error error = store.publish(entry.key, "k", entry.bytes);
    if (!error)
      return 3;
    llvm::consumeError(std::move(error));
    if (store.lock_for_compile(entry.key).acquired())
      return 4;
    return 0;
  });
  CHECK(snapshot(dir / "cache") == before);
}

TEST_CASE("a full file system fails publishes cleanly and leaves no temp files (D1, tmpfs)") {
  TempDir dir;
  std::string mount_point = dir / "small";
  make_dir(mount_point);
  in_private_mount_namespace("full tmpfs", [&]() -> int {
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0)
      return 77;
    DiskStore store(options_for(mount_point + "/cache"));
    int failures = 0;
    for (int variant = 0; variant < 40; ++variant) {
      SampleEntry entry = sample_entry("k", variant, 8000);
      llvm::Error error = store.publish(entry.key, "k", entry.bytes);
      if (error) {
        ++failures;
        if (summarize(std::move(error)).message.find("No space left") == std::string::npos)
          return 1;
      }
      if (!files_in(mount_point + "/cache/v1/tmp").empty())
        return 2;
    }
    if (failures == 0)
      return 3;
    // What was published is intact.
    if (!store.verify(false).empty())
      return 4;
    return 0;
  });
}
