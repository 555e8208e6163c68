// A1, A2 and A5 (RELIABILITY.md): many processes racing on one cache directory, with the
// cross-process compile lock working and with it made ineffective. Every cubin any process is
// handed is compared with a reference compile of its key.
#include "reliability_support.h"

#include <random>

using namespace specjit;
using namespace specjit::reliability;

namespace {

struct RaceFigures {
  int64_t requests = 0, failures = 0, corrupt_loads = 0, unverified = 0, corrupt_entries = 0;
  int64_t compiles = 0, duplicates = 0, temp_files = 0, entries = 0, failing_entries = 0;
  int64_t length_varied = 0; // verified by the weaker comparison (same_compile.h)
};

// `processes` helpers start together (a start file) on `root` and request [1, variants].
RaceFigures race(const TempDir& dir, const std::string& name, const References& refs,
                 int processes, int variants, bool shuffle, bool no_locks, int round) {
  std::string root = dir / (name + "-cache"), log = dir / (name + "-events.jsonl");
  std::string start = dir / (name + "-start");
  std::vector<Child> children;
  for (int p = 0; p < processes; ++p) {
    std::vector<std::string> args = {"prepare",     "--policy", "exact",   "--first",
                                     "1",           "--last",   std::to_string(variants),
                                     "--reference", refs.dir,   "--start-file", start};
    if (shuffle) {
      args.push_back("--shuffle");
      args.push_back(std::to_string(round * 100 + p));
    }
    if (no_locks)
      args.push_back("--no-locks");
    children.push_back(spawn(args, env_for(root, log), dir / (name + "-p" + std::to_string(p))));
    REQUIRE(children.back().pid > 0);
  }
  touch(start);
  RaceFigures figures;
  for (Child& child : children) {
    REQUIRE(reap(child));
    llvm::json::Object result = json_of(child.out());
    CHECK_MESSAGE(child.exit_code == 0, "stderr: " << child.err());
    REQUIRE_MESSAGE(!result.empty(), "no JSON; stderr: " << child.err());
    CHECK(field(result, "requests") == variants);
    figures.requests += field(result, "requests");
    figures.failures += field(result, "failures");
    figures.corrupt_loads += field(result, "corrupt_loads");
    figures.unverified += field(result, "unverified");
    figures.corrupt_entries += field(result, "corrupt_entries");
    figures.length_varied += field(result, "length_varied");
  }
  CompileCount compiles = count_compiles(log);
  figures.compiles = compiles.compiles;
  figures.duplicates = compiles.duplicates;
  CHECK(compiles.keys == variants); // every key was compiled by someone
  figures.temp_files = temp_files_left(root);
  RootCheckResult state = check_root(root, refs.dir);
  figures.entries = state.entries;
  figures.failing_entries = state.failing_verification + state.corrupt_loads + state.unverified;
  return figures;
}

void check_clean(const RaceFigures& f, int processes, int variants) {
  CHECK(f.failures == 0);
  CHECK(f.corrupt_loads == 0);
  CHECK(f.unverified == 0);
  CHECK(f.corrupt_entries == 0); // no reader ever met a partial or corrupt entry
  CHECK(f.temp_files == 0);
  CHECK(f.entries == variants);
  CHECK(f.failing_entries == 0);
  CHECK(f.requests == int64_t{processes} * variants);
}

} // namespace

TEST_CASE("A1: 8 processes start together on an empty cache; each key compiles once") {
  TempDir dir;
  const int processes = 8, variants = 50;
  References refs = make_references(dir, 1, variants);
  auto start = std::chrono::steady_clock::now();
  RaceFigures f = race(dir, "a1", refs, processes, variants, /*shuffle=*/false,
                       /*no_locks=*/false, 0);
  check_clean(f, processes, variants);
  CHECK(f.compiles == variants);
  CHECK(f.duplicates == 0);
  figures("A1", {{"processes", num(int64_t{processes})},
                 {"variants", num(int64_t{variants})},
                 {"requests", num(f.requests)},
                 {"corrupt_loads", num(f.corrupt_loads)},
                 {"compiles", num(f.compiles)},
                 {"duplicate_compiles", num(f.duplicates)},
                 {"temp_files_left", num(f.temp_files)},
                 {"length_varied", num(f.length_varied)},
                 {"seconds", num(seconds_since(start))}});
}

TEST_CASE("A2: 16 processes in random order, many rounds on fresh directories") {
  TempDir dir;
  const int processes = 16, rounds = sized(6, 20), variants = sized(8, 16);
  References refs = make_references(dir, 1, variants);
  auto start = std::chrono::steady_clock::now();
  RaceFigures total;
  for (int round = 0; round < rounds; ++round) {
    CAPTURE(round);
    RaceFigures f = race(dir, "a2-" + std::to_string(round), refs, processes, variants,
                         /*shuffle=*/true, /*no_locks=*/false, round);
    check_clean(f, processes, variants);
    total.requests += f.requests;
    total.failures += f.failures;
    total.corrupt_loads += f.corrupt_loads;
    total.corrupt_entries += f.corrupt_entries;
    total.duplicates += f.duplicates;
    total.temp_files += f.temp_files;
  }
  CHECK(total.duplicates == 0);
  figures("A2", {{"processes", num(int64_t{processes})},
                 {"rounds", num(int64_t{rounds})},
                 {"variants", num(int64_t{variants})},
                 {"requests", num(total.requests)},
                 {"errors", num(total.failures)},
                 {"checksum_failures", num(total.corrupt_entries)},
                 {"corrupt_loads", num(total.corrupt_loads)},
                 {"duplicate_compiles", num(total.duplicates)},
                 {"temp_files_left", num(total.temp_files)},
                 {"seconds", num(seconds_since(start))}});
}

// A3 takes no compile locks at all (publish and lookup never lock), so A3 itself already runs
// "without locks"; A5 repeats A1 and A2 with every lock failing (ENOLCK, as on NFS without
// locks): only duplicate compiles may rise.
TEST_CASE("A5: with locks made ineffective, A1 and A2 still have 0 corrupt loads") {
  TempDir dir;
  const int a1_variants = sized(8, 50), a2_variants = sized(3, 16), a2_rounds = sized(2, 20);
  References refs = make_references(dir, 1, std::max(a1_variants, a2_variants));
  auto start = std::chrono::steady_clock::now();
  RaceFigures a1 = race(dir, "a5-a1", refs, 8, a1_variants, false, /*no_locks=*/true, 0);
  check_clean(a1, 8, a1_variants);
  RaceFigures a2;
  for (int round = 0; round < a2_rounds; ++round) {
    RaceFigures f = race(dir, "a5-a2-" + std::to_string(round), refs, 16, a2_variants, true,
                         /*no_locks=*/true, round);
    check_clean(f, 16, a2_variants);
    a2.requests += f.requests;
    a2.corrupt_loads += f.corrupt_loads;
    a2.corrupt_entries += f.corrupt_entries;
    a2.duplicates += f.duplicates;
    a2.temp_files += f.temp_files;
  }
  figures("A5", {{"a1_processes", "8"},
                 {"a1_variants", num(int64_t{a1_variants})},
                 {"a2_processes", "16"},
                 {"a2_rounds", num(int64_t{a2_rounds})},
                 {"a2_variants", num(int64_t{a2_variants})},
                 {"requests", num(a1.requests + a2.requests)},
                 {"corrupt_loads", num(a1.corrupt_loads + a2.corrupt_loads)},
                 {"checksum_failures", num(a1.corrupt_entries + a2.corrupt_entries)},
                 {"duplicate_compiles", num(a1.duplicates + a2.duplicates)},
                 {"temp_files_left", num(a1.temp_files + a2.temp_files)},
                 {"seconds", num(seconds_since(start))}});
}
