// A3 (RELIABILITY.md): one writer republishes a key over and over while 16 readers read it.
// Publishing is write-temp + rename, so a reader sees the old entry or the new one, complete,
// and never a missing, short or mixed one. Neither side takes a compile lock, so this is also
// A3 "with locks made ineffective" (A5).
#include "reliability_support.h"

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("A3: 16 readers never see a short or corrupt entry while a writer republishes it") {
  TempDir dir;
  const int readers = 16;
  const int seconds = sized(5, 30);
  References refs = make_references(dir, 7, 7);
  std::string root = dir / "cache", log = dir / "events.jsonl";
  // The entry the writer republishes: a real one, taken from the reference run's cache.
  cache::StoreOptions options;
  options.root = dir / "reference-cache";
  std::vector<cache::ListedEntry> listed = cache::DiskStore(options).list();
  REQUIRE(listed.size() == 1);
  std::string entry = listed[0].location.path;

  std::string start = dir / "start";
  Child writer = spawn({"publish-loop", "--entry", entry, "--seconds", std::to_string(seconds),
                        "--start-file", start},
                       env_for(root, log), dir / "writer");
  // The first publish must land before the readers start, or their first reads are misses.
  llvm::json::Object seed = run_helper({"publish-loop", "--entry", entry, "--seconds", "0.01"},
                                       env_for(root, log), dir / "seed");
  REQUIRE(field(seed, "publishes") >= 1);
  std::vector<Child> children;
  for (int r = 0; r < readers; ++r)
    children.push_back(spawn({"read-loop", "--reference", refs.dir, "--seconds",
                              std::to_string(seconds), "--start-file", start},
                             env_for(root, log), dir / ("reader" + std::to_string(r))));
  touch(start);
  int64_t reads = 0, misses = 0, short_reads = 0, checksum_failures = 0, other = 0, corrupt = 0;
  for (Child& child : children) {
    REQUIRE(reap(child));
    CHECK_MESSAGE(child.exit_code == 0, child.err());
    llvm::json::Object result = json_of(child.out());
    REQUIRE(!result.empty());
    reads += field(result, "reads");
    misses += field(result, "misses");
    short_reads += field(result, "short_reads");
    checksum_failures += field(result, "checksum_failures");
    other += field(result, "other_faults");
    corrupt += field(result, "corrupt_loads");
  }
  REQUIRE(reap(writer));
  CHECK_MESSAGE(writer.exit_code == 0, writer.err());
  llvm::json::Object written = json_of(writer.out());
  int64_t publishes = field(written, "publishes");
  CHECK(publishes > 10);
  CHECK(field(written, "errors") == 0);
  CHECK(reads > 0);
  CHECK(misses == 0);
  CHECK(short_reads == 0);
  CHECK(checksum_failures == 0);
  CHECK(other == 0);
  CHECK(corrupt == 0);
  CHECK(temp_files_left(root) == 0);
  CHECK(names_in(root + "/v1/corrupt").empty());
  figures("A3", {{"readers", num(int64_t{readers})},
                 {"seconds", num(int64_t{seconds})},
                 {"publishes", num(publishes)},
                 {"reads", num(reads)},
                 {"misses", num(misses)},
                 {"short_reads", num(short_reads)},
                 {"checksum_failures", num(checksum_failures)},
                 {"corrupt_loads", num(corrupt)},
                 {"temp_files_left", num(temp_files_left(root))}});
}
