// Publish's two durabilities (cache::Durability): a durable publish syncs the entry, its tag
// and their directory before it returns; a relaxed one syncs nothing, and what a crash can
// leave of it (a torn or empty file) is a verified miss, moved aside and repaired.
#include "cache/disk_store.h"

#include "store_test_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <unistd.h>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::read_file;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

// How many fsync calls a publish made, and on what.
struct Syncs {
  int files = 0;  // temp files (entries and tags), before their rename
  int others = 0; // directories
};

Syncs syncs_of(DiskStore& store, const SampleEntry& entry, Durability durability) {
  std::atomic<int> files{0}, others{0};
  InjectorGuard guard([&](IoOp op, llvm::StringRef path) {
    if (op == IoOp::fsync)
      (path.endswith(".tmp") ? files : others).fetch_add(1);
    return 0;
  });
  llvm::Error error = store.publish(entry.key, "k", entry.bytes, durability);
  REQUIRE_MESSAGE(!error, llvm::toString(std::move(error)));
  return {files.load(), others.load()};
}

void publish_relaxed(DiskStore& store, const SampleEntry& entry) {
  llvm::Error error = store.publish(entry.key, "k", entry.bytes, Durability::relaxed);
  REQUIRE_MESSAGE(!error, llvm::toString(std::move(error)));
}

} // namespace

TEST_CASE("a durable publish syncs the entry and its directory; a relaxed one syncs nothing") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry durable = sample_entry("k", 1);
  Syncs synced = syncs_of(store, durable, Durability::durable);
  CHECK(synced.files == 1);
  CHECK(synced.others == 1);

  SampleEntry relaxed = sample_entry("k", 2);
  Syncs unsynced = syncs_of(store, relaxed, Durability::relaxed);
  CHECK(unsynced.files == 0);
  CHECK(unsynced.others == 0);
  // Readers cannot tell them apart: both are complete, verified entries.
  for (const SampleEntry* entry : {&durable, &relaxed}) {
    LookupResult found = store.lookup(entry->key, "k");
    REQUIRE(found.hit.has_value());
    CHECK(found.hit->entry.cubin == entry->cubin);
  }
  CHECK(files_in(dir / "cache/v1/tmp").empty());
}

TEST_CASE("with a trust key, a relaxed publish writes the tag unsynced too") {
  TempDir dir;
  std::string key = dir / "trust.key";
  write_file(key, std::string(40, 'k'));
  REQUIRE(chmod(key.c_str(), 0600) == 0);
  StoreOptions options = options_for(dir / "cache");
  options.trust_key_file = key;
  DiskStore store(options);
  SampleEntry entry = sample_entry("k", 3);
  Syncs synced = syncs_of(store, entry, Durability::durable);
  CHECK(synced.files == 2); // the tag, then the entry
  Syncs unsynced = syncs_of(store, sample_entry("k", 4), Durability::relaxed);
  CHECK(unsynced.files == 0);
  CHECK(unsynced.others == 0);
  CHECK(files_in(dir / "cache/v1/entries/k").size() == 4); // two entries, two tags
}

TEST_CASE("a relaxed entry torn or emptied by a crash is a miss, moved aside, then repaired") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry entry = sample_entry("k", 5, 4096);
  const std::string path = store.entry_path(entry.key, "k");
  for (size_t kept : {entry.bytes.size() / 2, size_t{0}}) {
    CAPTURE(kept);
    publish_relaxed(store, entry);
    // What an unsynced file can hold after a crash: a prefix of its bytes, or none.
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(kept)) == 0);
    LookupResult torn = store.lookup(entry.key, "k");
    CHECK(!torn.hit);
    REQUIRE(torn.corrupt.size() == 1);
    CHECK(torn.corrupt[0].moved_aside);
    CHECK(!exists(path));
    publish_relaxed(store, entry);
    LookupResult repaired = store.lookup(entry.key, "k");
    REQUIRE(repaired.hit.has_value());
    CHECK(read_file(path) == entry.bytes);
  }
  CHECK(files_in(dir / "cache/v1/corrupt").size() == 2);
}
