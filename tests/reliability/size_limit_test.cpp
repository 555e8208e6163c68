// E1 (RELIABILITY.md): 8 writers fill a size-limited cache to 3x its limit while readers read
// every key. Every publish prunes least-recently-used entries; the root settles at or below
// 1.1x the limit, and eviction (unlink) never truncates an entry under a reader: readers only
// ever see complete, verified entries, and an open entry stays readable after its eviction.
#include "reliability_support.h"

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("E1: 8 concurrent writers filling 3x the size limit settle under 1.1x the limit") {
  TempDir dir;
  const int writers = 8, per_writer = sized(3, 8), readers = 4;
  const int variants = writers * per_writer;
  References refs = make_references(dir, 1, variants);
  uint64_t total = check_root(dir / "reference-cache", refs.dir).bytes;
  uint64_t limit = total / 3;
  std::string root = dir / "cache", log = dir / "events.jsonl", start = dir / "start";
  std::vector<std::string> env =
      env_for(root, log, {"SPECJIT_CACHE_MAX_SIZE=" + std::to_string(limit)});

  // A reader holding an entry open while it is evicted (it opened before the writers start).
  llvm::json::Object seeded = run_helper({"prepare", "--policy", "exact", "--value", "1"}, env,
                                         dir / "seed");
  REQUIRE(field(seeded, "compiles") == 1);
  std::vector<std::string> first_entry = names_in(root + "/v1/entries/scale_tokens");
  REQUIRE(first_entry.size() == 1);
  std::string held_path = root + "/v1/entries/scale_tokens/" + first_entry[0];
  std::string held_bytes = test::read_file(held_path);
  int held = open(held_path.c_str(), O_RDONLY);
  REQUIRE(held >= 0);

  std::vector<Child> children;
  for (int w = 0; w < writers; ++w) {
    int first = 1 + w * per_writer;
    children.push_back(spawn({"prepare", "--policy", "exact", "--first", std::to_string(first),
                              "--last", std::to_string(first + per_writer - 1), "--reference",
                              refs.dir, "--start-file", start},
                             env, dir / ("writer" + std::to_string(w))));
  }
  std::vector<Child> reader_children;
  for (int r = 0; r < readers; ++r)
    reader_children.push_back(spawn({"read-loop", "--reference", refs.dir, "--seconds",
                                     std::to_string(sized(3, 10)), "--start-file", start},
                                    env, dir / ("reader" + std::to_string(r))));
  touch(start);
  int64_t corrupt = 0, write_failures = 0, failures = 0;
  for (Child& child : children) {
    REQUIRE(reap(child));
    CHECK_MESSAGE(child.exit_code == 0, child.err());
    llvm::json::Object result = json_of(child.out());
    REQUIRE(!result.empty());
    corrupt += field(result, "corrupt_loads");
    write_failures += field(result, "write_failures");
    failures += field(result, "failures");
    CHECK(field(result, "verified") == per_writer);
  }
  int64_t reads = 0, hits = 0, short_reads = 0, checksum_failures = 0, other = 0;
  for (Child& child : reader_children) {
    REQUIRE(reap(child));
    llvm::json::Object result = json_of(child.out());
    REQUIRE(!result.empty());
    reads += field(result, "reads");
    hits += field(result, "hits");
    corrupt += field(result, "corrupt_loads");
    short_reads += field(result, "short_reads");
    checksum_failures += field(result, "checksum_failures");
    other += field(result, "other_faults");
  }
  // The held entry was evicted long ago, and is still whole through the open descriptor.
  std::string through_fd(held_bytes.size() + 1, '\0');
  ssize_t got = pread(held, through_fd.data(), through_fd.size(), 0);
  close(held);
  CHECK(got == static_cast<ssize_t>(held_bytes.size()));
  through_fd.resize(got > 0 ? static_cast<size_t>(got) : 0);
  CHECK(through_fd == held_bytes);

  RootCheckResult state = check_root(root, refs.dir);
  double ratio = static_cast<double>(state.bytes) / static_cast<double>(limit);
  CHECK(failures == 0);
  CHECK(write_failures == 0);
  CHECK(corrupt == 0);
  CHECK(short_reads == 0);
  CHECK(checksum_failures == 0);
  CHECK(other == 0);
  CHECK(ratio <= 1.1);
  CHECK(state.failing_verification + state.corrupt_loads + state.unverified == 0);
  CHECK(temp_files_left(root) == 0);
  figures("E1", {{"writers", num(int64_t{writers})},
                 {"readers", num(int64_t{readers})},
                 {"variants", num(int64_t{variants})},
                 {"limit_bytes", num(static_cast<int64_t>(limit))},
                 {"written_bytes", num(static_cast<int64_t>(total))},
                 {"settled_bytes", num(static_cast<int64_t>(state.bytes))},
                 {"settled_ratio", num(ratio)},
                 {"reader_hits", num(hits)},
                 {"reader_reads", num(reads)},
                 {"truncated_under_reader", num(short_reads + checksum_failures + other)},
                 {"corrupt_loads", num(corrupt)}});
}
