#include "cache/disk_store.h"

#include "store_test_support.h"

#include <doctest/doctest.h>

#include <set>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

// Publishes `count` entries of kernel "k" whose last use lies 100 s, 200 s, ... in the past,
// the first being the oldest.
std::vector<SampleEntry> aged_entries(DiskStore& store, int count) {
  std::vector<SampleEntry> entries;
  for (int i = 0; i < count; ++i) {
    entries.push_back(publish_sample(store, "k", i));
    set_mtime(store.entry_path(entries.back().key, "k"), 100 * (count - i));
  }
  return entries;
}

std::set<int> surviving(DiskStore& store, const std::vector<SampleEntry>& entries) {
  std::set<int> alive;
  for (size_t i = 0; i < entries.size(); ++i)
    if (exists(store.entry_path(entries[i].key, "k")))
      alive.insert(static_cast<int>(i));
  return alive;
}

} // namespace

TEST_CASE("prune removes least recently used entries first, and prune(0) empties the root") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  std::vector<SampleEntry> entries = aged_entries(store, 5);
  const uint64_t size = entries[0].bytes.size();
  for (const SampleEntry& entry : entries)
    REQUIRE(entry.bytes.size() == size);

  // A hit makes the oldest entry the newest.
  REQUIRE(store.lookup(entries[0].key, "k").hit);

  PruneResult result = store.prune(3 * size);
  CHECK(result.removed == 2);
  CHECK(result.bytes_before == 5 * size);
  CHECK(result.bytes_after == 3 * size);
  CHECK(surviving(store, entries) == std::set<int>{0, 3, 4});

  result = store.prune(3 * size); // already within the limit
  CHECK(result.removed == 0);

  result = store.prune(0);
  CHECK(result.removed == 3);
  CHECK(result.bytes_after == 0);
  CHECK(surviving(store, entries).empty());
}

TEST_CASE("publish enforces max_bytes after publishing") {
  TempDir dir;
  StoreOptions options = options_for(dir / "cache");
  const uint64_t size = sample_entry("k", 0).bytes.size();
  options.max_bytes = 3 * size + size / 2;
  DiskStore store(options);
  std::vector<SampleEntry> entries = aged_entries(store, 3);
  CHECK(surviving(store, entries).size() == 3);
  SampleEntry newest = publish_sample(store, "k", 3);
  CHECK(surviving(store, entries) == std::set<int>{1, 2});
  CHECK(store.lookup(newest.key, "k").hit);
}

TEST_CASE("list returns the entries of the root and the layers, newest use first") {
  TempDir dir;
  SampleEntry in_layer;
  {
    DiskStore base(options_for(dir / "base"));
    in_layer = publish_sample(base, "other", 9);
    set_mtime(base.entry_path(in_layer.key, "other"), 50);
  }
  DiskStore store(options_for(dir / "cache", {dir / "base"}));
  std::vector<SampleEntry> entries = aged_entries(store, 2); // 200 s and 100 s ago
  // A broken file is listed without metadata.
  SampleEntry broken = sample_entry("k", 7);
  write_file(store.entry_path(broken.key, "k"), "garbage");
  set_mtime(store.entry_path(broken.key, "k"), 1000);

  std::vector<ListedEntry> listed = store.list();
  REQUIRE(listed.size() == 4);
  CHECK(listed[0].key == in_layer.key);
  CHECK(listed[0].location.layer == 1);
  CHECK(listed[0].kernel == "other");
  CHECK(listed[1].key == entries[1].key);
  CHECK(listed[2].key == entries[0].key);
  CHECK(listed[3].key == broken.key);
  CHECK(!listed[3].metadata);
  const uint64_t sizes[3] = {in_layer.bytes.size(), entries[1].bytes.size(),
                             entries[0].bytes.size()};
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(listed[i].metadata);
    CHECK(listed[i].bytes == sizes[i]);
    CHECK(listed[i].last_use_seconds > 0);
  }
  CHECK(listed[1].metadata->key_inputs == entries[1].inputs);

  std::vector<ListedEntry> only_k = store.list(llvm::StringRef("k"));
  CHECK(only_k.size() == 3);
  CHECK(store.list(llvm::StringRef("nothing")).empty());
}

TEST_CASE("verify reports bad entries and moves them aside only with repair") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  std::vector<SampleEntry> entries = aged_entries(store, 3);
  std::string flipped = entries[0].bytes;
  flipped[20] ^= 4; // the key field: a checksum mismatch
  write_file(store.entry_path(entries[0].key, "k"), flipped);
  SampleEntry copied = sample_entry("k", 42); // C2: entry 1 copied under key 42's name
  write_file(store.entry_path(copied.key, "k"), entries[1].bytes);

  std::vector<CorruptFinding> findings = store.verify(/*repair=*/false);
  REQUIRE(findings.size() == 2);
  std::set<EntryFault> faults;
  for (const CorruptFinding& finding : findings) {
    faults.insert(finding.fault);
    CHECK(!finding.moved_aside);
    CHECK(exists(finding.path));
  }
  CHECK(faults == std::set<EntryFault>{EntryFault::checksum_mismatch, EntryFault::key_mismatch});

  findings = store.verify(/*repair=*/true);
  REQUIRE(findings.size() == 2);
  for (const CorruptFinding& finding : findings) {
    CHECK(finding.moved_aside);
    CHECK(!exists(finding.path));
  }
  CHECK(files_in(dir / "cache/v1/corrupt").size() == 2);
  CHECK(store.verify(false).empty());
  CHECK(surviving(store, entries) == std::set<int>{1, 2});
}

TEST_CASE("clear removes every root entry, temp file, quarantined entry and lock") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  std::vector<SampleEntry> entries = aged_entries(store, 3);
  publish_sample(store, "other", 1);
  write_file(dir / "cache/v1/tmp/leftover.tmp", "x");
  CHECK(store.lock_for_compile(entries[0].key).acquired());
  std::string bad = entries[2].bytes;
  bad[0] = 'X';
  write_file(store.entry_path(entries[2].key, "k"), bad);
  CHECK(store.lookup(entries[2].key, "k").corrupt.size() == 1); // quarantined

  CHECK(store.clear().removed == 3);
  CHECK(store.list().empty());
  for (const char* sub : {"tmp", "corrupt", "locks", "entries"})
    CHECK(files_in(dir / ("cache/v1/" + std::string(sub))).empty());
  CHECK(snapshot(dir / "cache/v1/entries").empty()); // kernel directories too
  CHECK(store.clear().removed == 0);
  publish_sample(store, "k", 1); // and the store keeps working
}

TEST_CASE("sweep_stale_temps removes old temp files and leaves fresh ones alone (B2)") {
  TempDir dir;
  StoreOptions options = options_for(dir / "cache");
  options.stale_temp_seconds = 3600;
  DiskStore store(options);
  SampleEntry entry = publish_sample(store, "k", 1);
  std::string old_temp = dir / "cache/v1/tmp/old.1.2.tmp";
  std::string fresh_temp = dir / "cache/v1/tmp/fresh.3.4.tmp";
  write_file(old_temp, "half an entry");
  write_file(fresh_temp, "a live writer's entry");
  set_mtime(old_temp, 2 * 3600);
  set_mtime(fresh_temp, 60);

  CHECK(store.sweep_stale_temps() == 1);
  CHECK(!exists(old_temp));
  CHECK(exists(fresh_temp));
  CHECK(store.lookup(entry.key, "k").hit); // entries are not temps
  CHECK(store.sweep_stale_temps() == 0);
}
