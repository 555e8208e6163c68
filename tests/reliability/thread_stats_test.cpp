// A6 (RELIABILITY.md): 4 processes x 8 threads request the same variants in shuffled orders.
// The counters are exact: every call is one request, every request exactly one outcome, each
// key is resolved (disk or compile) exactly once per process and compiled once per host.
// tools/sanitize.sh runs this test with the helper built under ThreadSanitizer.
#include "reliability_support.h"

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("A6: 4 processes x 8 threads keep exact statistics") {
  TempDir dir;
  const int processes = 4, threads = 8, variants = sized(12, 50), repeat = sized(3, 10);
  References refs = make_references(dir, 1, variants);
  std::string root = dir / "cache", log = dir / "events.jsonl", start = dir / "start";
  std::vector<Child> children;
  for (int p = 0; p < processes; ++p)
    children.push_back(spawn({"prepare", "--policy", "exact", "--first", "1", "--last",
                              std::to_string(variants), "--threads", std::to_string(threads),
                              "--each-thread", "--shuffle", std::to_string(p), "--repeat",
                              std::to_string(repeat), "--reference", refs.dir, "--start-file",
                              start},
                             env_for(root, log), dir / ("p" + std::to_string(p))));
  touch(start);
  const int64_t calls = int64_t{threads} * variants * repeat;
  int64_t requests = 0, hits = 0, misses = 0, corrupt = 0, compiles = 0;
  for (Child& child : children) {
    REQUIRE(reap(child));
    CHECK_MESSAGE(child.exit_code == 0, child.err());
    llvm::json::Object r = json_of(child.out());
    REQUIRE(!r.empty());
    CHECK(field(r, "calls") == calls);
    CHECK(field(r, "requests") == calls);
    CHECK(field(r, "failures") == 0);
    CHECK(field(r, "memory_hits") + field(r, "disk_hits") + field(r, "compiles") == calls);
    CHECK(field(r, "disk_hits") + field(r, "compiles") == variants); // once per key per process
    CHECK(field(r, "verified") == calls);
    requests += field(r, "requests");
    hits += field(r, "memory_hits") + field(r, "disk_hits");
    misses += field(r, "compiles");
    compiles += field(r, "compiles");
    corrupt += field(r, "corrupt_loads");
  }
  CHECK(corrupt == 0);
  CompileCount logged = count_compiles(log);
  CHECK(logged.compiles == compiles);
  CHECK(logged.duplicates == 0);
  CHECK(compiles == variants);
  figures("A6", {{"processes", num(int64_t{processes})},
                 {"threads", num(int64_t{threads})},
                 {"variants", num(int64_t{variants})},
                 {"requests", num(requests)},
                 {"hits", num(hits)},
                 {"misses", num(misses)},
                 {"corrupt_loads", num(corrupt)},
                 {"duplicate_compiles", num(logged.duplicates)}});
}
