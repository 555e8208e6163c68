#include "cache/disk_store.h"

#include "store_test_support.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;
using specjit::test::write_file;

TEST_CASE("a published entry is found again, byte for byte") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  CHECK(store.writable());
  CHECK(store.root_state() == RootState::writable);
  CHECK(!exists(dir / "cache")); // created lazily, by the first publish

  SampleEntry entry = publish_sample(store, "inv_rope_fp8_quant", 64);
  CHECK(read_file(store.entry_path(entry.key, "inv_rope_fp8_quant")) == entry.bytes);

  LookupResult result = store.lookup(entry.key, "inv_rope_fp8_quant");
  REQUIRE(result.hit.has_value());
  CHECK(result.corrupt.empty());
  CHECK(result.hit->entry.cubin == entry.cubin);
  CHECK(result.hit->entry.key == entry.key);
  CHECK(result.hit->entry.metadata.key_inputs == entry.inputs);
  CHECK(result.hit->location.layer == 0);
  CHECK(!result.hit->location.readonly());
  CHECK(result.hit->location.path == store.entry_path(entry.key, "inv_rope_fp8_quant"));
  CHECK(files_in(dir / "cache/v1/tmp").empty());
}

TEST_CASE("an unknown key is a plain miss") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry();
  LookupResult result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  CHECK(result.corrupt.empty());
  publish_sample(store, "k", 1);
  result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  CHECK(result.corrupt.empty());
}

TEST_CASE("republishing a key replaces the entry atomically") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry first = publish_sample(store, "k", 1);
  SampleEntry again = publish_sample(store, "k", 1);
  CHECK(first.bytes == again.bytes);
  CHECK(store.lookup(first.key, "k").hit.has_value());
  CHECK(files_in(dir / "cache/v1/entries/k").size() == 1);
}

TEST_CASE("a corrupt root entry is a miss, is moved aside, and the next publish hits (C1)") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = publish_sample(store, "k", 7);
  std::string path = store.entry_path(entry.key, "k");
  std::string bytes = entry.bytes;
  bytes[k_entry_header_size + 10] ^= 0x10; // one bit of the cubin
  write_file(path, bytes);

  LookupResult result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  REQUIRE(result.corrupt.size() == 1);
  CHECK(result.corrupt[0].path == path);
  CHECK(result.corrupt[0].fault == EntryFault::checksum_mismatch);
  CHECK(result.corrupt[0].moved_aside);
  CHECK(!exists(path));
  std::vector<std::string> quarantined = files_in(dir / "cache/v1/corrupt");
  REQUIRE(quarantined.size() == 1);
  CHECK(read_file(dir / ("cache/v1/corrupt/" + quarantined[0])) == bytes);

  // Looking again is a clean miss; republishing heals.
  result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  CHECK(result.corrupt.empty());
  publish_sample(store, "k", 7);
  CHECK(store.lookup(entry.key, "k").hit.has_value());
}

TEST_CASE("an entry copied under another key's name is rejected and moved aside (C2)") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry one = publish_sample(store, "k", 1);
  SampleEntry two = sample_entry("k", 2);
  write_file(store.entry_path(two.key, "k"), one.bytes);
  LookupResult result = store.lookup(two.key, "k");
  CHECK(!result.hit);
  REQUIRE(result.corrupt.size() == 1);
  CHECK(result.corrupt[0].fault == EntryFault::key_mismatch);
  CHECK(store.lookup(one.key, "k").hit.has_value());
}

TEST_CASE("publish refuses bytes that would not verify") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry("k", 1);
  SampleEntry other = sample_entry("k", 2);
  llvm::Error error = store.publish(other.key, "k", entry.bytes);
  REQUIRE(static_cast<bool>(error));
  ErrorSummary summary = summarize(std::move(error));
  CHECK(summary.code == Errc::invalid_argument);
  CHECK(!store.lookup(other.key, "k").hit);
}

TEST_CASE("kernel ids cannot climb out of the entries directory") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  for (const char* kernel : {"../../escape", "..", "", "a/b", ".hidden"}) {
    CAPTURE(kernel);
    std::string path = store.entry_path(sample_entry(kernel).key, kernel);
    std::string prefix = dir / "cache/v1/entries/";
    REQUIRE(path.rfind(prefix, 0) == 0);
    std::string rest = path.substr(prefix.size());
    CHECK(std::count(rest.begin(), rest.end(), '/') == 1);
    CHECK(rest[0] != '.');
    SampleEntry entry = publish_sample(store, kernel, 1);
    CHECK(store.lookup(entry.key, kernel).hit.has_value());
  }
  CHECK(!exists(dir / "escape"));
}

TEST_CASE("a hit refreshes an old root entry's last-use time, a recent one is left alone") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = publish_sample(store, "k", 1);
  std::string path = store.entry_path(entry.key, "k");
  set_mtime(path, 3600);
  int64_t old_stamp = mtime_ns(path);
  REQUIRE(store.lookup(entry.key, "k").hit);
  int64_t refreshed = mtime_ns(path);
  CHECK(refreshed > old_stamp + 3000ll * 1000000000);
  set_mtime(path, 10); // recent: not worth a write
  int64_t recent = mtime_ns(path);
  REQUIRE(store.lookup(entry.key, "k").hit);
  CHECK(mtime_ns(path) == recent);
}

TEST_CASE("a read-only layer serves hits and is never written (D2)") {
  TempDir dir;
  SampleEntry entry;
  std::string layer_path;
  {
    DiskStore builder(options_for(dir / "base"));
    entry = publish_sample(builder, "k", 1);
    SampleEntry second = publish_sample(builder, "k", 2);
    layer_path = builder.entry_path(entry.key, "k");
    // Old enough that a root entry would have its stamp refreshed; corrupt one entry too.
    set_mtime(layer_path, 7200);
    std::string bad = second.bytes;
    bad[5] ^= 1;
    write_file(builder.entry_path(second.key, "k"), bad);
  }
  Snapshot before = snapshot(dir / "base");

  DiskStore store(options_for(dir / "cache", {dir / "base"}));
  LookupResult result = store.lookup(entry.key, "k");
  REQUIRE(result.hit.has_value());
  CHECK(result.hit->location.layer == 1);
  CHECK(result.hit->location.readonly());
  CHECK(result.hit->location.path == layer_path);
  CHECK(result.hit->entry.cubin == entry.cubin);

  // The corrupt layer entry is reported, never moved.
  SampleEntry second = sample_entry("k", 2);
  result = store.lookup(second.key, "k");
  CHECK(!result.hit);
  REQUIRE(result.corrupt.size() == 1);
  CHECK(!result.corrupt[0].moved_aside);
  CHECK(result.corrupt[0].fault == EntryFault::bad_magic);

  // Nothing the store does writes to the layer: locks, verify with repair, prune, clear, sweep.
  CHECK(store.lock_for_compile(entry.key).acquired()); // in the root
  CHECK(store.verify(/*repair=*/true).size() == 1);
  CHECK(!store.quarantine(EntryLocation{layer_path, 1}));
  store.prune(0);
  store.clear();
  store.sweep_stale_temps();
  CHECK(store.list().size() == 2);
  CHECK(snapshot(dir / "base") == before);

  // A root entry of the same key wins over the layer.
  publish_sample(store, "k", 1);
  result = store.lookup(entry.key, "k");
  REQUIRE(result.hit);
  CHECK(result.hit->location.layer == 0);
  CHECK(snapshot(dir / "base") == before);
}

TEST_CASE("layers are searched in order after the root") {
  TempDir dir;
  SampleEntry entry;
  {
    DiskStore second(options_for(dir / "second"));
    entry = publish_sample(second, "k", 3);
  }
  DiskStore store(options_for(dir / "cache", {dir / "first", dir / "second"}));
  LookupResult result = store.lookup(entry.key, "k");
  REQUIRE(result.hit);
  CHECK(result.hit->location.layer == 2);
}

TEST_CASE("a deleted root is recreated by the next publish (D3)") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = publish_sample(store, "k", 1);
  REQUIRE(std::system(("rm -rf '" + dir / "cache" + "'").c_str()) == 0);
  CHECK(!store.lookup(entry.key, "k").hit);
  CHECK(store.lock_for_compile(entry.key).acquired()); // recreates the directories it needs
  publish_sample(store, "k", 1);
  CHECK(store.lookup(entry.key, "k").hit);
}

TEST_CASE("a failed publish names the path and errno and leaves no temp file (D1)") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  publish_sample(store, "k", 1); // the directories exist; only the write path fails below
  SampleEntry entry = sample_entry("k", 2);
  struct Case {
    IoOp op;
    int err;
    const char* text;
  };
  for (Case c :
       {Case{IoOp::write, ENOSPC, "No space left on device"},
        Case{IoOp::fsync, EIO, "Input/output error"}, Case{IoOp::close, EDQUOT, "quota"},
        Case{IoOp::rename, EXDEV, "link"}, Case{IoOp::open, EMFILE, "Too many open files"}}) {
    CAPTURE(io_op_name(c.op).str());
    {
      InjectorGuard guard([&](IoOp op, llvm::StringRef path) {
        return op == c.op && path.contains("/v1/") ? c.err : 0;
      });
      llvm::Error error = store.publish(entry.key, "k", entry.bytes);
      REQUIRE(static_cast<bool>(error));
      ErrorSummary summary = summarize(std::move(error));
      CHECK(summary.code == Errc::io);
      CHECK(summary.message.find(dir.path()) != std::string::npos);
      CHECK(summary.message.find(c.text) != std::string::npos);
    }
    CHECK(files_in(dir / "cache/v1/tmp").empty());
    CHECK(!exists(store.entry_path(entry.key, "k")));
  }
  // Every fault was a miss, not a corrupt entry, and the store still works.
  CHECK(store.lookup(entry.key, "k").corrupt.empty());
  publish_sample(store, "k", 2);
  CHECK(store.lookup(entry.key, "k").hit);
}

TEST_CASE("short writes are continued, never published short") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  InjectorGuard guard(
      [](IoOp op, llvm::StringRef) { return op == IoOp::write ? k_inject_short_write : 0; });
  SampleEntry entry = publish_sample(store, "k", 1, 10000);
  LookupResult result = store.lookup(entry.key, "k");
  REQUIRE(result.hit);
  CHECK(result.hit->entry.cubin == entry.cubin);
}

namespace {

// A child process that takes the compile lock of `key`, reports it on `ready`, and holds it
// until `release` is readable (or until it is killed).
pid_t spawn_lock_holder(const std::string& root, const Digest128& key, int ready, int release) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    DiskStore store(options_for(root));
    CompileLock lock = store.lock_for_compile(key);
    char acquired = lock.acquired() ? '1' : '0';
    if (write(ready, &acquired, 1) != 1)
      _exit(2);
    char byte;
    [[maybe_unused]] ssize_t n = read(release, &byte, 1);
    _exit(0);
  }
  return pid;
}

} // namespace

TEST_CASE("a compile lock held by another process times out, then is granted after it exits") {
  TempDir dir;
  SampleEntry entry = sample_entry("k", 1);
  for (bool kill_holder : {false, true}) {
    CAPTURE(kill_holder);
    int ready[2], release[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(release) == 0);
    pid_t holder = spawn_lock_holder(dir / "cache", entry.key, ready[1], release[0]);
    char acquired = 0;
    REQUIRE(read(ready[0], &acquired, 1) == 1);
    CHECK(acquired == '1');

    StoreOptions options = options_for(dir / "cache");
    options.lock_timeout_ms = 200;
    DiskStore store(options);
    auto start = std::chrono::steady_clock::now();
    CompileLock blocked = store.lock_for_compile(entry.key);
    auto waited = std::chrono::steady_clock::now() - start;
    CHECK(!blocked.acquired());
    CHECK(waited >= std::chrono::milliseconds(190));
    CHECK(waited < std::chrono::seconds(5));
    // Another key is independent.
    CHECK(store.lock_for_compile(sample_entry("k", 2).key).acquired());

    if (kill_holder) {
      kill(holder, SIGKILL); // A4: the kernel releases the flock of a dead holder
    } else {
      REQUIRE(write(release[1], "x", 1) == 1);
    }
    int status = 0;
    REQUIRE(waitpid(holder, &status, 0) == holder);
    for (int fd : {ready[0], ready[1], release[0], release[1]})
      close(fd);

    options.lock_timeout_ms = 2000;
    DiskStore after(options);
    CompileLock granted = after.lock_for_compile(entry.key);
    CHECK(granted.acquired());
    // Moving the lock keeps it held; a second lock in this process still conflicts.
    CompileLock moved = std::move(granted);
    CHECK(moved.acquired());
    options.lock_timeout_ms = 0;
    CHECK(!DiskStore(options).lock_for_compile(entry.key).acquired());
  }
}

TEST_CASE("lock failures are never errors: the caller just compiles") {
  TempDir dir;
  StoreOptions options = options_for(dir / "cache");
  options.lock_timeout_ms = 50;
  DiskStore store(options);
  SampleEntry entry = sample_entry("k", 1);
  {
    InjectorGuard guard([](IoOp op, llvm::StringRef) { return op == IoOp::lock ? ENOLCK : 0; });
    CHECK(!store.lock_for_compile(entry.key).acquired());
  }
  {
    InjectorGuard guard([](IoOp op, llvm::StringRef) { return op == IoOp::open ? EACCES : 0; });
    CHECK(!store.lock_for_compile(entry.key).acquired());
  }
  CHECK(store.lock_for_compile(entry.key).acquired());
}

TEST_CASE("threads republishing and reading one key never see a partial entry") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry("k", 1, 200000);
  std::atomic<int> hits{0}, corrupt{0}, errors{0};
  std::atomic<bool> writing{true};
  std::vector<std::thread> writers, readers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < 30; ++i) {
        if (llvm::Error error = store.publish(entry.key, "k", entry.bytes)) {
          llvm::consumeError(std::move(error));
          ++errors;
        }
      }
    });
    readers.emplace_back([&] {
      // Read until the writers are done, and once more after: then the entry must be there.
      for (bool last = false; !last;) {
        last = !writing.load();
        LookupResult result = store.lookup(entry.key, "k");
        corrupt += static_cast<int>(result.corrupt.size());
        if (result.hit && result.hit->entry.cubin == entry.cubin)
          ++hits;
      }
    });
  }
  for (std::thread& thread : writers)
    thread.join();
  writing = false;
  for (std::thread& thread : readers)
    thread.join();
  CHECK(errors == 0);
  CHECK(corrupt == 0);
  CHECK(hits > 0);
  CHECK(files_in(dir / "cache/v1/tmp").empty());
}
