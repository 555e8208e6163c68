// The disk store across trust boundaries: read-only layers get the root's ownership and mode
// checks, and with a trust key their entries are used only with a valid tag; links,
// directories and FIFOs where entries belong are reported, moved aside and then replaced.
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

std::string key_file(const TempDir& dir, const std::string& name, char fill) {
  std::string path = dir / name;
  write_file(path, std::string(40, fill));
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  return path;
}

StoreOptions keyed(StoreOptions options, const std::string& key) {
  options.trust_key_file = key;
  return options;
}

} // namespace

TEST_CASE("a world-writable read-only layer is refused with the reason and never read") {
  TempDir dir;
  SampleEntry entry;
  {
    DiskStore builder(options_for(dir / "base"));
    entry = publish_sample(builder, "k", 1);
  }
  REQUIRE(chmod((dir / "base").c_str(), 0777) == 0);
  DiskStore store(options_for(dir / "cache", {dir / "base"}));
  REQUIRE(store.refused_layers().size() == 1);
  CHECK(store.refused_layers()[0].layer == 1);
  CHECK(store.refused_layers()[0].reason.find("world-writable") != std::string::npos);
  CHECK(!store.lookup(entry.key, "k").hit);
  CHECK(store.list().empty());
  CHECK(store.verify(false).empty());

  REQUIRE(chmod((dir / "base").c_str(), 0755) == 0);
  DiskStore fixed(options_for(dir / "cache", {dir / "base"}));
  CHECK(fixed.refused_layers().empty());
  CHECK(fixed.lookup(entry.key, "k").hit);
}

TEST_CASE("with a trust key, a layer entry is used only with a valid tag") {
  TempDir dir;
  std::string key_a = key_file(dir, "a.key", 'a'), key_b = key_file(dir, "b.key", 'b');
  SampleEntry tagged, untagged;
  {
    DiskStore with_key(keyed(options_for(dir / "base"), key_a));
    REQUIRE(with_key.trust_key() != nullptr);
    tagged = publish_sample(with_key, "k", 1);
    DiskStore without_key(options_for(dir / "base"));
    untagged = publish_sample(without_key, "k", 2);
  }
  CHECK(exists(dir / ("base/v1/entries/k/" + tagged.key.hex() + ".sjt")));
  CHECK(!exists(dir / ("base/v1/entries/k/" + untagged.key.hex() + ".sjt")));

  DiskStore store(keyed(options_for(dir / "cache", {dir / "base"}), key_a));
  CHECK(store.lookup(tagged.key, "k").hit);
  LookupResult refused = store.lookup(untagged.key, "k");
  CHECK(!refused.hit);
  REQUIRE(refused.corrupt.size() == 1);
  CHECK(refused.corrupt[0].fault == EntryFault::untrusted);
  CHECK(entry_fault_name(refused.corrupt[0].fault) == "untrusted");
  CHECK(!refused.corrupt[0].moved_aside); // layers are read-only
  std::vector<CorruptFinding> findings = store.verify(false);
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].fault == EntryFault::untrusted);

  // Another key: nothing of the layer is trusted.
  DiskStore other(keyed(options_for(dir / "cache", {dir / "base"}), key_b));
  LookupResult wrong = other.lookup(tagged.key, "k");
  CHECK(!wrong.hit);
  REQUIRE(wrong.corrupt.size() == 1);
  CHECK(wrong.corrupt[0].detail.find("does not verify") != std::string::npos);

  // No key: behaviour as before, tags or not.
  DiskStore plain(options_for(dir / "cache", {dir / "base"}));
  CHECK(plain.lookup(untagged.key, "k").hit);
}

TEST_CASE("a configured key that cannot be loaded trusts no layer entry") {
  TempDir dir;
  std::string key = key_file(dir, "a.key", 'a');
  SampleEntry entry;
  {
    DiskStore builder(keyed(options_for(dir / "base"), key));
    entry = publish_sample(builder, "k", 1);
  }
  REQUIRE(chmod(key.c_str(), 0644) == 0);
  DiskStore store(keyed(options_for(dir / "cache", {dir / "base"}), key));
  CHECK(store.trust_key() == nullptr);
  CHECK(store.trust_key_error().find("group or others") != std::string::npos);
  LookupResult result = store.lookup(entry.key, "k");
  CHECK(!result.hit);
  REQUIRE(result.corrupt.size() == 1);
  CHECK(result.corrupt[0].fault == EntryFault::untrusted);
}

TEST_CASE("a directory in place of an entry is a miss, moved aside, then published over") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  publish_sample(store, "k", 1);
  SampleEntry entry = sample_entry("k", 2);
  std::string path = store.entry_path(entry.key, "k");
  REQUIRE(mkdir(path.c_str(), 0755) == 0);
  write_file(path + "/inside", "kept as it is");

  std::vector<CorruptFinding> findings = store.verify(false);
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].fault == EntryFault::not_a_file);
  CHECK(findings[0].path == path);

  LookupResult miss = store.lookup(entry.key, "k");
  CHECK(!miss.hit);
  REQUIRE(miss.corrupt.size() == 1);
  CHECK(miss.corrupt[0].moved_aside);
  llvm::Error error = store.publish(entry.key, "k", entry.bytes);
  REQUIRE_MESSAGE(!error, llvm::toString(std::move(error)));
  CHECK(store.lookup(entry.key, "k").hit);
  CHECK(store.verify(false).empty());
}

TEST_CASE("verify --repair moves a linked kernel directory and a FIFO entry aside") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  SampleEntry good = publish_sample(store, "k", 1);
  REQUIRE(mkdir((dir / "elsewhere").c_str(), 0755) == 0);
  REQUIRE(symlink((dir / "elsewhere").c_str(), (dir / "cache/v1/entries/linked").c_str()) == 0);
  SampleEntry fifo = sample_entry("k", 2);
  REQUIRE(mkfifo(store.entry_path(fifo.key, "k").c_str(), 0644) == 0);

  std::vector<CorruptFinding> findings = store.verify(/*repair=*/true);
  REQUIRE(findings.size() == 2);
  for (const CorruptFinding& finding : findings) {
    CHECK(finding.fault == EntryFault::not_a_file);
    CHECK(finding.moved_aside);
    CHECK(!exists(finding.path));
  }
  CHECK(exists(dir / "elsewhere")); // the link's target is untouched
  CHECK(store.verify(false).empty());
  CHECK(store.lookup(good.key, "k").hit);
}
