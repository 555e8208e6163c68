// D2 (RELIABILITY.md): a read-only root (a read-only bind mount in a private mount namespace;
// permission bits do not stop root, who runs CI), and a read-only base layer under a writable
// root. Hits are served, misses compiled into memory or into the writable root, and the
// read-only directory is never written: no entries, no locks, no temp files, no time stamps,
// no quarantine. Also: a root on a pseudo file system (/proc) is reported as unwritable.
#include "reliability_support.h"

#include "cache/store_test_support.h"

using namespace specjit;
using namespace specjit::reliability;
using cache::test::snapshot;
using cache::test::Snapshot;

namespace {

// A cache holding [first, last], every file made older than a minute (so that a hit would
// refresh its stamp, were the directory written).
void populate(const TempDir& dir, const std::string& root, int first, int last) {
  llvm::json::Object made = run_helper({"prepare", "--policy", "exact", "--first",
                                        std::to_string(first), "--last", std::to_string(last)},
                                       env_for(root, dir / "populate.jsonl"), dir / "populate");
  REQUIRE(field(made, "compiles") == last - first + 1);
  for (const auto& [path, state] : snapshot(root))
    if (state.type == 'f')
      cache::test::set_mtime(path, 7200);
}

} // namespace

TEST_CASE("D2: a read-only bind-mounted root serves hits, compiles misses to memory, is not written") {
  TempDir dir;
  const int cached = 5, requested = 10;
  References refs = make_references(dir, 1, requested);
  std::string root = dir / "cache";
  populate(dir, root, 1, cached);
  Snapshot before = snapshot(root);
  int rc = in_private_mount_namespace("D2 read-only bind mount", [&]() -> int {
    if (mount(root.c_str(), root.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, root.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return 77;
    Child child = spawn({"prepare", "--policy", "exact", "--first", "1", "--last",
                         std::to_string(requested), "--reference", refs.dir},
                        env_for(root, dir / "events.jsonl"), dir / "ro");
    return child.pid > 0 && reap(child) ? 0 : 10;
  });
  if (rc == 77)
    return;
  REQUIRE(rc == 0);
  llvm::json::Object result = json_of(test::read_file(dir / "ro.out"));
  REQUIRE_MESSAGE(!result.empty(), test::read_file(dir / "ro.err"));
  CHECK(field(result, "failures") == 0);
  CHECK(field(result, "disk_hits") == cached);
  CHECK(field(result, "compiles") == requested - cached);
  CHECK(field(result, "write_failures") == 0); // never even tried
  CHECK(field(result, "corrupt_loads") == 0);
  CHECK(field(result, "verified") == requested);
  CHECK(*result.getBoolean("disk_writable") == false);
  bool unchanged = snapshot(root) == before;
  CHECK(unchanged);
  figures("D2", {{"layer", "read_only_root"},
                 {"hits", num(field(result, "disk_hits"))},
                 {"compiled_to_memory", num(field(result, "compiles"))},
                 {"corrupt_loads", num(field(result, "corrupt_loads"))},
                 {"writes_to_read_only_dir", num(int64_t{!unchanged})}});
}

TEST_CASE("D2: a read-only base layer under a writable root is read, never written") {
  TempDir dir;
  const int cached = 5, requested = 10;
  References refs = make_references(dir, 1, requested);
  std::string base = dir / "base", root = dir / "cache";
  populate(dir, base, 1, cached);
  // One base entry is corrupt: reported and recompiled, but not moved aside.
  std::vector<std::string> entries = names_in(base + "/v1/entries/scale_tokens");
  REQUIRE(entries.size() == static_cast<size_t>(cached));
  std::string bad = base + "/v1/entries/scale_tokens/" + entries[0];
  std::string bytes = test::read_file(bad);
  bytes[bytes.size() / 2] ^= 1;
  test::write_file(bad, bytes);
  cache::test::set_mtime(bad, 7200);
  Snapshot before = snapshot(base);
  std::vector<std::string> env =
      env_for(root, dir / "events.jsonl", {"SPECJIT_CACHE_READONLY_DIRS=" + base});
  llvm::json::Object result = run_helper({"prepare", "--policy", "exact", "--first", "1", "--last",
                                          std::to_string(requested), "--reference", refs.dir},
                                         env, dir / "layered");
  CHECK(field(result, "failures") == 0);
  CHECK(field(result, "disk_hits") == cached - 1);
  CHECK(field(result, "compiles") == requested - cached + 1);
  // Reported exactly once, although the engine looks again after taking the compile lock and
  // a read-only layer's corrupt entry (never moved aside) is still there the second time.
  CHECK(field(result, "corrupt_entries") == 1);
  CHECK(field(result, "corrupt_loads") == 0);
  CHECK(field(result, "verified") == requested);
  bool unchanged = snapshot(base) == before;
  CHECK(unchanged);
  // The misses went to the writable root.
  RootCheckResult state = check_root(root, refs.dir);
  CHECK(state.entries == requested - cached + 1);
  CHECK(state.failing_verification + state.corrupt_loads + state.unverified == 0);
  figures("D2", {{"layer", "read_only_base"},
                 {"hits", num(field(result, "disk_hits"))},
                 {"compiled_to_root", num(state.entries)},
                 {"corrupt_base_entries_left_in_place", "1"},
                 {"corrupt_loads", num(field(result, "corrupt_loads"))},
                 {"writes_to_read_only_dir", num(int64_t{!unchanged})}});
}

TEST_CASE("D2: a root on a pseudo file system is reported unwritable, not failed on every write") {
  // As root, access(2) says /proc is writable; creating anything there fails.
  for (std::string root : {"/proc/specjit-cache", "/proc"}) {
    CAPTURE(root);
    TempDir dir;
    llvm::json::Object result = run_helper({"prepare", "--policy", "exact", "--value", "1"},
                                           env_for(root, dir / "events.jsonl"), dir / "proc");
    CHECK(field(result, "failures") == 0);
    CHECK(*result.getBoolean("disk_writable") == false);
    CHECK(field(result, "write_failures") == 0);
    test::write_file(dir / "manifest.json",
                     R"({"version": 1, "variants": [{"kernel": "scale_tokens",)"
                     R"( "values": {"cols": 128, "num_tokens": 1}}]})");
    test::ProcessResult cli = test::run_process(
        {SPECJIT_CLI, "precompile", "--cache-dir", root, "--manifest", dir / "manifest.json"},
        {"SPECJIT_LOG=off", "SPECJIT_ARCH=sm_90a"});
    CHECK(cli.err.find("the cache cannot be written") != std::string::npos);
  }
}
