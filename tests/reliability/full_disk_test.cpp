// D1 (RELIABILITY.md): the cache on a tiny tmpfs (mounted in a private mount namespace of a
// forked child, so nothing outside sees it) fills up. Every request is still served (from
// memory), each failed publish is counted and logged as write_failed, and no temp file stays.
// Skipped with a printed line where mounts are not permitted.
#include "reliability_support.h"

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("D1: a cache on a file system that fills up still serves every request") {
  TempDir dir;
  const int variants = sized(16, 40);
  References refs = make_references(dir, 1, variants);
  // Room for about a third of the entries.
  RootCheckResult reference_cache = check_root(dir / "reference-cache", refs.dir);
  uint64_t size_kb = std::max<uint64_t>(16, reference_cache.bytes / 3 / 1024);
  std::string mount_point = dir / "small", log = dir / "events.jsonl";
  REQUIRE(mkdir(mount_point.c_str(), 0755) == 0);
  std::string root = mount_point + "/cache";
  int rc = in_private_mount_namespace("D1 full tmpfs", [&]() -> int {
    std::string size = "size=" + std::to_string(size_kb) + "k";
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, size.c_str()) != 0)
      return 77;
    for (int run = 0; run < 2; ++run) {
      // Two processes in turn: the second finds what fitted and compiles the rest.
      Child child = spawn({"prepare", "--policy", "exact", "--first", "1", "--last",
                           std::to_string(variants), "--reference", refs.dir},
                          env_for(root, log), dir / ("run" + std::to_string(run)));
      if (child.pid <= 0 || !reap(child))
        return 10;
      test::write_file(dir / ("temps" + std::to_string(run)), num(temp_files_left(root)));
    }
    RootCheckResult state = check_root(root, refs.dir);
    test::write_file(dir / "state", num(state.entries) + " " +
                                        num(state.failing_verification + state.corrupt_loads +
                                            state.unverified));
    return 0;
  });
  if (rc == 77)
    return;
  REQUIRE(rc == 0);
  int64_t served = 0, corrupt = 0, write_failures = 0, compiles = 0, disk_hits = 0;
  for (int run = 0; run < 2; ++run) {
    llvm::json::Object result = json_of(test::read_file(dir / ("run" + std::to_string(run)) + ".out"));
    REQUIRE_MESSAGE(!result.empty(), test::read_file(dir / ("run" + std::to_string(run)) + ".err"));
    CHECK(field(result, "failures") == 0);
    CHECK(field(result, "verified") == variants);
    CHECK(field(result, "corrupt_entries") == 0);
    CHECK(test::read_file(dir / ("temps" + std::to_string(run))) == "0");
    served += field(result, "verified");
    corrupt += field(result, "corrupt_loads");
    write_failures += field(result, "write_failures");
    compiles += field(result, "compiles");
    disk_hits += field(result, "disk_hits");
    if (run == 0)
      CHECK(field(result, "write_failures") > 0); // it did fill up
    if (run == 1)
      CHECK(field(result, "disk_hits") > 0); // what fitted is served
  }
  CHECK(corrupt == 0);
  auto failed = test::events_named(test::read_json_lines(log), "write_failed");
  CHECK(static_cast<int64_t>(failed.size()) == write_failures);
  for (const auto& event : failed)
    CHECK(test::string_field(event, "detail").find("No space left") != std::string::npos);
  std::string state = test::read_file(dir / "state");
  CHECK(state.substr(state.find(' ') + 1) == "0"); // every entry that made it verifies
  figures("D1", {{"fs_kb", num(static_cast<int64_t>(size_kb))},
                 {"processes", "2"},
                 {"variants", num(int64_t{variants})},
                 {"requests_served", num(served)},
                 {"write_failed_logged", num(static_cast<int64_t>(failed.size()))},
                 {"compiles", num(compiles)},
                 {"disk_hits", num(disk_hits)},
                 {"corrupt_loads", num(corrupt)},
                 {"temp_files_left", "0"}});
}
