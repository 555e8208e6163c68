// Reading headers for direct mode: resolution through the include directories, digests taken
// from stat hints only while a file's status is exactly the recorded one (an edit that keeps
// the size and puts the mtime back is still caught), copies hashed again, and recently
// changed files never hinted. No NVRTC, no GPU.
#include "runtime/header_deps.h"
#include "runtime/header_reader.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

// Long enough for any local file system's time-stamp tick, short enough for a unit test.
constexpr auto k_settle = std::chrono::milliseconds(100);

HeaderReaderOptions with_hints(cache::StatHints& hints) {
  return {&hints, HintUse::lookup, k_settle};
}

// A tree old enough (past k_settle) for its files to be hinted.
struct Tree {
  TempDir dir;
  std::vector<std::string> dirs;
  Tree() {
    REQUIRE(!llvm::sys::fs::create_directories(dir / "front"));
    REQUIRE(!llvm::sys::fs::create_directories(dir / "inc/sub"));
    test::write_file(dir / "inc/a.h", "#define A 1\n");
    test::write_file(dir / "inc/sub/b.h", "#define B 2\n");
    test::write_file(dir / "inc/sub/c.h", "#define C 3\n");
    dirs = {dir / "front", dir / "inc"};
    std::this_thread::sleep_for(2 * k_settle);
  }
};

Digest128 digest_of(HeaderReader& reader, const std::string& name) {
  std::optional<HeaderReader::Resolved> found = reader.resolve(name);
  REQUIRE_MESSAGE(found.has_value(), name);
  REQUIRE(found->digest.has_value());
  return *found->digest;
}

} // namespace

TEST_CASE("a header whose status is unchanged is taken from its hint, not hashed") {
  Tree tree;
  cache::StatHints hints;
  HeaderReader first(tree.dirs, with_hints(hints));
  Digest128 a = digest_of(first, "a.h");
  Digest128 b = digest_of(first, "sub/b.h");
  CHECK(a == hash128("#define A 1\n"));
  CHECK(first.counts().hashed == 2);
  CHECK(hints.size() == 2);
  CHECK(hints.changed());

  HeaderReader second(tree.dirs, with_hints(hints));
  CHECK(digest_of(second, "a.h") == a);
  CHECK(digest_of(second, "sub/b.h") == b);
  CHECK(second.counts().from_hints == 2);
  CHECK(second.counts().hashed == 0);

  // After a compile every header is hashed again, and the hints are refreshed.
  HeaderReader after_compile(tree.dirs, {&hints, HintUse::record_only, k_settle});
  CHECK(after_compile.hash_path(tree.dir / "inc/a.h") == a);
  CHECK(after_compile.counts().hashed == 1);
}

TEST_CASE("an edit that keeps the size and puts the mtime back is still detected") {
  Tree tree;
  cache::StatHints hints;
  cache::DependencySet set;
  {
    HeaderReader reader(tree.dirs, with_hints(hints));
    set = {{"a.h", 1, digest_of(reader, "a.h")}, {"sub/b.h", 1, digest_of(reader, "sub/b.h")}};
  }
  {
    HeaderReader reader(tree.dirs, with_hints(hints));
    CHECK_FALSE(check_dependency_set(set, reader).has_value());
    CHECK(reader.counts().from_hints == 2);
  }

  std::string path = tree.dir / "inc/sub/b.h";
  struct stat before;
  REQUIRE(::stat(path.c_str(), &before) == 0);
  test::write_file(path, "#define B 9\n"); // same size
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  struct stat after;
  REQUIRE(::stat(path.c_str(), &after) == 0);
  REQUIRE(after.st_size == before.st_size);
  REQUIRE(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  REQUIRE(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  REQUIRE(after.st_ino == before.st_ino);

  HeaderReader reader(tree.dirs, with_hints(hints));
  std::optional<HeaderChange> change = check_dependency_set(set, reader);
  REQUIRE(change.has_value());
  CHECK(change->name == "sub/b.h");
  CHECK(change->requested == hash128("#define B 9\n").hex());
  CHECK(reader.counts().hashed == 1);
}

TEST_CASE("a copied tree has new inodes: its headers are hashed again and keep their digests") {
  Tree tree;
  cache::StatHints hints;
  HeaderReader original(tree.dirs, with_hints(hints));
  Digest128 a = digest_of(original, "a.h");
  Digest128 b = digest_of(original, "sub/b.h");

  // cp -a keeps the mtimes too: only the inode and ctime tell the copy apart.
  test::ProcessResult copy =
      test::run_process({"/bin/cp", "-a", tree.dir / "inc", tree.dir / "copy"});
  REQUIRE_MESSAGE(copy.exit_code == 0, copy.err);
  HeaderReader copied({tree.dir / "front", tree.dir / "copy"}, with_hints(hints));
  CHECK(digest_of(copied, "a.h") == a);
  CHECK(digest_of(copied, "sub/b.h") == b);
  CHECK(copied.counts().hashed == 2);
  CHECK(copied.counts().from_hints == 0);
}

TEST_CASE("a file changed moments before the check is hashed but never hinted") {
  TempDir dir;
  test::write_file(dir / "fresh.h", "#define F 1\n");
  cache::StatHints hints;
  HeaderReader reader({dir.path()}, {&hints, HintUse::lookup}); // the default settle time
  CHECK(digest_of(reader, "fresh.h") == hash128("#define F 1\n"));
  CHECK(reader.counts().hashed == 1);
  CHECK(hints.size() == 0);
  CHECK_FALSE(hints.changed());
}

TEST_CASE("names resolve in the first directory holding them; directories without the subtree "
          "are probed once") {
  Tree tree;
  HeaderReader reader(tree.dirs);
  CHECK(reader.resolve("sub/b.h")->include_dir == 1);
  CHECK(reader.resolve("sub/c.h")->include_dir == 1);
  // "sub" once in each directory, then each name in inc only.
  CHECK(reader.counts().probes == 4);
  CHECK_FALSE(reader.resolve("sub/missing.h").has_value());
  CHECK_FALSE(reader.resolve("sub").has_value()); // a directory is not a header

  // A name that an earlier directory now holds resolves there (the check reports the shadow).
  REQUIRE(!llvm::sys::fs::create_directories(tree.dir / "front/sub"));
  test::write_file(tree.dir / "front/sub/b.h", "#define B 2\n");
  HeaderReader again(tree.dirs);
  CHECK(again.resolve("sub/b.h")->include_dir == 0);
  CHECK(again.resolve("a.h")->include_dir == 1);

  // A missing include directory holds nothing; the others still resolve.
  HeaderReader partly({tree.dir / "gone", tree.dir / "inc"});
  CHECK(partly.resolve("a.h")->include_dir == 1);
}

TEST_CASE("only plain relative names are looked up: never a path out of the include dirs") {
  Tree tree;
  test::write_file(tree.dir / "outside.h", "#define O 1\n");
  HeaderReader reader(tree.dirs);
  for (const char* name :
       {"../outside.h", "sub/../a.h", "./a.h", "sub//b.h", "/etc/hostname", "", "sub/"})
    CHECK_FALSE_MESSAGE(reader.resolve(name).has_value(), name);
  CHECK(reader.counts().probes == 0);
}

TEST_CASE("resolving a whole set on several threads gives the answers one by one would") {
  TempDir dir;
  REQUIRE(!llvm::sys::fs::create_directories(dir / "a/x"));
  REQUIRE(!llvm::sys::fs::create_directories(dir / "a/y"));
  REQUIRE(!llvm::sys::fs::create_directories(dir / "b/x"));
  REQUIRE(!llvm::sys::fs::create_directories(dir / "b/y"));
  cache::DependencySet set;
  for (int i = 0; i < 300; ++i) {
    // Spread over both directories and subtrees; some shadowed, some missing.
    std::string name = (i % 3 == 0 ? "x/" : "y/") + std::to_string(i) + ".h";
    test::write_file(dir / ((i % 5 == 0 ? "a/" : "b/") + name),
                     "#define H " + std::to_string(i) + "\n");
    if (i % 7 == 0 && i % 3 == 0)
      test::write_file(dir / ("b/" + name), "#define SHADOWED\n");
    set.push_back({name, 1, {}});
  }
  set.push_back({"y/missing.h", 1, {}});
  set.push_back({"../escape.h", 1, {}});
  std::sort(set.begin(), set.end(), [](const auto& l, const auto& r) { return l.name < r.name; });
  std::this_thread::sleep_for(2 * k_settle);
  const std::vector<std::string> dirs = {dir / "a", dir / "b"};

  cache::StatHints one_hints, all_hints;
  HeaderReader one_by_one(dirs, with_hints(one_hints));
  HeaderReader all(dirs, {&all_hints, HintUse::lookup, k_settle, 4});
  all.resolve_all(set);
  for (const cache::HeaderDependency& header : set) {
    std::optional<HeaderReader::Resolved> expected = one_by_one.resolve(header.name);
    std::optional<HeaderReader::Resolved> got = all.resolve(header.name);
    REQUIRE_MESSAGE(expected.has_value() == got.has_value(), header.name);
    if (expected) {
      CHECK(expected->include_dir == got->include_dir);
      CHECK(expected->digest == got->digest);
    }
  }
  CHECK(all.counts().hashed == 300);
  CHECK(all.counts().hashed == one_by_one.counts().hashed);
  CHECK(all_hints.size() == 300);

  // Again with those hints: nothing hashed, the same digests.
  HeaderReader hinted(dirs, {&all_hints, HintUse::lookup, k_settle, 4});
  hinted.resolve_all(set);
  CHECK(hinted.counts().from_hints == 300);
  CHECK(hinted.counts().hashed == 0);
  for (const cache::HeaderDependency& header : set)
    if (std::optional<HeaderReader::Resolved> expected = one_by_one.resolve(header.name))
      CHECK(hinted.resolve(header.name)->digest == expected->digest);
}
