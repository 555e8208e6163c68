// Stat hints: the file format round-trips, a hint matches only the exact recorded status, and a
// corrupt, foreign, shared or misplaced hint file is ignored rather than trusted.
#include "cache/stat_hints.h"

#include "store_test_support.h"
#include "test_support.h"

#include "support/error.h"

#include <llvm/Support/FileSystem.h>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

const Digest128 k_definition = hash128("a definition");

StatHint sample_hint(uint64_t inode) {
  StatHint hint;
  hint.stat = {2049, inode, 1000 + inode, 1700000000123456789, 1700000001987654321};
  hint.digest = hash128("bytes of file " + std::to_string(inode));
  return hint;
}

StatHints sample_hints(uint64_t count) {
  StatHints hints;
  for (uint64_t inode = 1; inode <= count; ++inode)
    hints.record(sample_hint(inode));
  return hints;
}

std::string hints_path(const TempDir& dir, const Digest128& definition = k_definition) {
  return dir / ("cache/v1/hints/" + definition.hex() + ".hints");
}

} // namespace

TEST_CASE("stat hints round-trip and match only the exact recorded status") {
  std::string bytes = encode_stat_hints(k_definition, sample_hints(3));
  auto decoded = decode_stat_hints(bytes, k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(decoded), llvm::toString(decoded.takeError()));
  CHECK(decoded->size() == 3);
  CHECK_FALSE(decoded->changed());

  StatHint hint = sample_hint(2);
  CHECK(decoded->lookup(hint.stat) == hint.digest);
  // Any one field of the status differing is a miss: a copy (inode), an append (size), an
  // edit (mtime) or an edit whose mtime was put back (ctime moved on).
  auto altered = [&](auto change) {
    FileStat stat = hint.stat;
    change(stat);
    return stat;
  };
  CHECK_FALSE(decoded->lookup(altered([](FileStat& s) { s.device += 1; })).has_value());
  CHECK_FALSE(decoded->lookup(altered([](FileStat& s) { s.inode += 100; })).has_value());
  CHECK_FALSE(decoded->lookup(altered([](FileStat& s) { s.size += 1; })).has_value());
  CHECK_FALSE(decoded->lookup(altered([](FileStat& s) { s.mtime_ns += 1; })).has_value());
  CHECK_FALSE(decoded->lookup(altered([](FileStat& s) { s.ctime_ns += 1; })).has_value());

  // Recording the same file again replaces its hint.
  StatHint rewritten = hint;
  rewritten.stat.ctime_ns += 5;
  rewritten.digest = hash128("new bytes");
  decoded->record(rewritten);
  CHECK(decoded->changed());
  CHECK(decoded->size() == 3);
  CHECK_FALSE(decoded->lookup(hint.stat).has_value());
  CHECK(decoded->lookup(rewritten.stat) == rewritten.digest);
}

TEST_CASE("a damaged or foreign hint encoding is an error, never a hint") {
  std::string bytes = encode_stat_hints(k_definition, sample_hints(4));
  auto is_corrupt = [](llvm::Expected<StatHints> hints) {
    if (hints)
      return false;
    return summarize(hints.takeError()).code == Errc::corrupt;
  };
  CHECK(is_corrupt(decode_stat_hints(bytes, hash128("another definition"))));
  CHECK(is_corrupt(decode_stat_hints(bytes.substr(0, bytes.size() - 1), k_definition)));
  CHECK(is_corrupt(decode_stat_hints(bytes + "x", k_definition)));
  CHECK(is_corrupt(decode_stat_hints("", k_definition)));
  CHECK(is_corrupt(decode_stat_hints("specjit-hints 2\n" + bytes.substr(16), k_definition)));
  for (size_t at : {size_t{20}, size_t{40}, size_t{60}, bytes.size() - 3}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x40);
    CHECK(is_corrupt(decode_stat_hints(flipped, k_definition)));
  }
}

TEST_CASE("the hints kept are the ones used or learnt first, and at most the limit") {
  std::string bytes = encode_stat_hints(k_definition, sample_hints(k_max_stat_hints));
  auto hints = decode_stat_hints(bytes, k_definition);
  REQUIRE(static_cast<bool>(hints));
  CHECK(hints->lookup(sample_hint(k_max_stat_hints).stat).has_value()); // used: kept first
  hints->record(sample_hint(k_max_stat_hints + 1));                     // learnt: kept
  std::vector<StatHint> kept = hints->to_keep();
  REQUIRE(kept.size() == k_max_stat_hints);
  CHECK(kept[0].stat.inode == k_max_stat_hints);
  CHECK(kept[1].stat.inode == k_max_stat_hints + 1);
  CHECK(kept[2].stat.inode == 1);
  CHECK(kept.back().stat.inode == k_max_stat_hints - 2); // the oldest unused one went
}

TEST_CASE("hints are read back from the root only when they are this user's private file") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  REQUIRE(!publish_stat_hints(store, k_definition, sample_hints(2)));
  std::string path = hints_path(dir);
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(read_stat_hints(store, k_definition).size() == 2);
  CHECK(read_stat_hints(store, hash128("another definition")).size() == 0);

  SUBCASE("readable by others") {
    REQUIRE(::chmod(path.c_str(), 0644) == 0);
    CHECK(read_stat_hints(store, k_definition).size() == 0);
  }
  SUBCASE("garbage") {
    write_file(path, "not hints at all");
    CHECK(read_stat_hints(store, k_definition).size() == 0);
  }
  SUBCASE("another definition's file under this name") {
    write_file(path, encode_stat_hints(hash128("another definition"), sample_hints(2)));
    REQUIRE(::chmod(path.c_str(), 0600) == 0);
    CHECK(read_stat_hints(store, k_definition).size() == 0);
  }
  SUBCASE("a link to a valid hint file") {
    std::string elsewhere = dir / "elsewhere.hints";
    REQUIRE(::rename(path.c_str(), elsewhere.c_str()) == 0);
    REQUIRE(::symlink(elsewhere.c_str(), path.c_str()) == 0);
    CHECK(read_stat_hints(store, k_definition).size() == 0);
  }
  SUBCASE("owned by another user") {
    if (::geteuid() != 0) {
      MESSAGE("SKIPPED: changing a file's owner needs root");
      return;
    }
    REQUIRE(::chown(path.c_str(), 4242, static_cast<gid_t>(-1)) == 0);
    CHECK(read_stat_hints(store, k_definition).size() == 0);
  }
  // Whatever was wrong, the next publish puts a good file back.
  REQUIRE(!publish_stat_hints(store, k_definition, sample_hints(3)));
  CHECK(read_stat_hints(store, k_definition).size() == 3);
}

TEST_CASE("a root that cannot be written has no hints and takes none") {
  TempDir dir;
  {
    DiskStore writable(options_for(dir / "cache"));
    REQUIRE(!publish_stat_hints(writable, k_definition, sample_hints(2)));
  }
  write_file(dir / "file", "x");
  // The hint file of a layer is never read: a layer's inodes are another machine's.
  DiskStore layered(options_for(dir / "file/cache", {dir / "cache"}));
  REQUIRE(layered.root_state() == RootState::read_only);
  CHECK(read_stat_hints(layered, k_definition).size() == 0);
  llvm::Error refused = publish_stat_hints(layered, k_definition, sample_hints(1));
  REQUIRE(static_cast<bool>(refused));
  CHECK(summarize(std::move(refused)).message.find("not writable") != std::string::npos);
}

TEST_CASE("clear removes the hints with the manifests") {
  TempDir dir;
  DiskStore store(options_for(dir / "cache"));
  REQUIRE(!publish_stat_hints(store, k_definition, sample_hints(2)));
  REQUIRE(llvm::sys::fs::exists(hints_path(dir)));
  store.clear();
  CHECK_FALSE(llvm::sys::fs::exists(hints_path(dir)));
}
