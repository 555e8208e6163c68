// The background publisher of local copies: every queued entry is in the root, verified, once
// the publisher is destroyed (or drained); a failure reaches the entry's handler; an
// unwritable root queues nothing; nothing is synced.
#include "cache/async_publisher.h"

#include "store_test_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;

namespace {

AsyncPublisher::Job job_for(const SampleEntry& entry, AsyncPublisher::FailureHandler handler = {}) {
  auto owner = std::make_shared<const std::string>("prefix:" + entry.bytes);
  llvm::StringRef bytes = llvm::StringRef(*owner).drop_front(7);
  return {entry.key, "k", std::move(owner), bytes, std::move(handler)};
}

} // namespace

TEST_CASE("every queued entry is published, unsynced, once the publisher is destroyed") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  std::vector<SampleEntry> entries;
  for (int v = 1; v <= 20; ++v)
    entries.push_back(sample_entry("k", v, 2048));
  std::atomic<int> fsyncs{0};
  {
    InjectorGuard guard([&](IoOp op, llvm::StringRef) {
      fsyncs += op == IoOp::fsync;
      return 0;
    });
    AsyncPublisher publisher(store);
    for (const SampleEntry& entry : entries)
      publisher.enqueue(job_for(entry));
  }
  CHECK(fsyncs.load() == 0);
  for (const SampleEntry& entry : entries) {
    LookupResult found = store.lookup(entry.key, "k");
    REQUIRE(found.hit.has_value());
    CHECK(read_file(store.entry_path(entry.key, "k")) == entry.bytes);
  }
  CHECK(files_in(dir / "cache/v1/tmp").empty());
}

TEST_CASE("drain waits for what was queued; the publisher keeps working after it") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  AsyncPublisher publisher(store);
  SampleEntry first = sample_entry("k", 1), second = sample_entry("k", 2);
  publisher.enqueue(job_for(first));
  publisher.drain();
  CHECK(store.lookup(first.key, "k").hit.has_value());
  publisher.enqueue(job_for(second));
  publisher.drain();
  CHECK(store.lookup(second.key, "k").hit.has_value());
}

TEST_CASE("a failed publish reaches the entry's handler with the path and the reason") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry("k", 3);
  std::string path, reason;
  {
    InjectorGuard guard([](IoOp op, llvm::StringRef) { return op == IoOp::write ? ENOSPC : 0; });
    AsyncPublisher publisher(store);
    publisher.enqueue(job_for(entry, [&](const std::string& where, llvm::Error error) {
      path = where;
      reason = llvm::toString(std::move(error));
    }));
  }
  CHECK(path == store.entry_path(entry.key, "k"));
  CHECK(reason.find("No space left on device") != std::string::npos);
  CHECK(!store.lookup(entry.key, "k").hit);
  CHECK(files_in(dir / "cache/v1/tmp").empty());
}

TEST_CASE("an unwritable root queues nothing and starts no writer") {
  TempDir dir;
  specjit::test::write_file(dir / "file", "not a directory");
  DiskStore store(options_for(dir / "file/cache"));
  REQUIRE(!store.writable());
  bool called = false;
  {
    AsyncPublisher publisher(store);
    publisher.enqueue(job_for(sample_entry("k", 4), [&](const std::string&, llvm::Error error) {
      called = true;
      llvm::consumeError(std::move(error));
    }));
    publisher.drain();
  }
  CHECK(!called);
}

TEST_CASE("a child forked after the writer started publishes inline and exits cleanly") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  auto publisher = std::make_unique<AsyncPublisher>(store);
  publisher->enqueue(job_for(sample_entry("k", 5)));
  publisher->drain();
  SampleEntry in_child = sample_entry("k", 6);
  pid_t pid = ::fork();
  if (pid == 0) {
    // The parent's publisher, whose thread does not exist here.
    publisher->enqueue(job_for(in_child));
    bool found = store.lookup(in_child.key, "k").hit.has_value(); // inline: already there
    publisher.reset();                                            // neither joins nor terminates
    ::_exit(found ? 0 : 3);
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(store.lookup(in_child.key, "k").hit.has_value());
  publisher->enqueue(job_for(sample_entry("k", 7))); // the parent's writer still runs
  publisher.reset();
  CHECK(store.lookup(sample_entry("k", 7).key, "k").hit.has_value());
}
