// B1 and B2 (RELIABILITY.md): writers killed with SIGKILL at chosen points of a publish (temp
// file created, partly written through short writes, synced, renamed, directory synced), and
// the temp files dead writers leave behind. No published entry may fail verification, the next
// run must succeed, and the stale-temp sweep removes only the temp files of dead writers that
// are older than the stale age.
#include "reliability_support.h"

#include "cache/store_test_support.h"

#include <random>
#include <thread>

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("B1: SIGKILL at random points of a write never publishes a bad entry") {
  TempDir dir;
  const int runs = sized(30, 100);
  const uint64_t seed = 20250107;
  References refs = make_references(dir, 101, 100 + runs);
  std::string root = dir / "cache", log = dir / "events.jsonl";
  // How many file operations one publish takes, from its first temp-file operation on.
  int64_t ops[2] = {0, 0};
  for (int short_writes = 0; short_writes < 2; ++short_writes) {
    std::vector<std::string> args = {"prepare", "--policy", "exact", "--value", "101",
                                     "--crash-at", "0"};
    if (short_writes)
      args.push_back("--short-writes");
    llvm::json::Object counted =
        run_helper(args, env_for(dir / ("count-cache" + std::to_string(short_writes)), log),
                   dir / "count");
    ops[short_writes] = field(counted, "ops_counted");
    REQUIRE(ops[short_writes] >= 5);
  }
  std::mt19937_64 rng(seed);
  int64_t killed = 0, killed_before_rename = 0, bad_entries = 0, next_failures = 0,
          next_corrupt = 0, next_disk_hits = 0;
  for (int run = 0; run < runs; ++run) {
    bool short_writes = run % 2 == 0;
    int64_t crash_at = 1 + static_cast<int64_t>(rng() % ops[short_writes]);
    CAPTURE(run);
    CAPTURE(crash_at);
    std::string value = std::to_string(101 + run);
    std::vector<std::string> args = {"prepare",    "--policy", "exact", "--value", value,
                                     "--crash-at", std::to_string(crash_at)};
    if (short_writes)
      args.push_back("--short-writes");
    Child writer = spawn(args, env_for(root, log), dir / "writer");
    REQUIRE(reap(writer));
    if (writer.signal_number == SIGKILL)
      ++killed;
    else
      CHECK_MESSAGE(writer.exit_code == 0, writer.err());
    // Whatever was published verifies and is exactly the reference compile.
    RootCheckResult state = check_root(root, refs.dir);
    CHECK(state.failing_verification == 0);
    CHECK(state.corrupt_loads == 0);
    CHECK(state.unverified == 0);
    bad_entries += state.failing_verification + state.corrupt_loads;
    // The next run succeeds: served, and exactly the reference compile.
    llvm::json::Object next =
        run_helper({"prepare", "--policy", "exact", "--value", value, "--reference", refs.dir},
                   env_for(root, log), dir / "next");
    CHECK(field(next, "failures") == 0);
    CHECK(field(next, "corrupt_loads") == 0);
    CHECK(field(next, "corrupt_entries") == 0);
    CHECK(field(next, "verified") == 1);
    next_failures += field(next, "failures");
    next_corrupt += field(next, "corrupt_loads");
    next_disk_hits += field(next, "disk_hits");
    if (field(next, "disk_hits") == 0 && writer.signal_number == SIGKILL)
      ++killed_before_rename;
  }
  CHECK(killed > runs / 2);
  figures("B1", {{"runs", num(int64_t{runs})},
                 {"killed", num(killed)},
                 {"killed_before_rename", num(killed_before_rename)},
                 {"killed_after_rename", num(next_disk_hits)},
                 {"published_entries_failing_verification", num(bad_entries)},
                 {"next_run_failures", num(next_failures)},
                 {"corrupt_loads", num(next_corrupt)},
                 {"dead_writer_temp_files", num(temp_files_left(root))},
                 {"seed", num(static_cast<int64_t>(seed))}});
}

TEST_CASE("B2: only temp files of dead writers older than the stale age are swept") {
  TempDir dir;
  References refs = make_references(dir, 201, 204);
  std::string root = dir / "cache", log = dir / "events.jsonl";
  std::vector<std::string> env = env_for(root, log);
  auto stopped_writer = [&](int64_t value) {
    Child child = spawn({"prepare", "--policy", "exact", "--value", std::to_string(value),
                         "--stop-in-write"},
                        env, dir / ("writer" + std::to_string(value)));
    REQUIRE(child.pid > 0);
    REQUIRE(wait_stopped(child));
    return child;
  };
  auto temps = [&] {
    std::vector<std::string> names = names_in(root + "/v1/tmp");
    std::sort(names.begin(), names.end());
    return names;
  };
  // A live writer (stopped in its write, resumed later), and two dead ones.
  Child live = stopped_writer(201);
  std::vector<std::string> live_temp = temps();
  REQUIRE(live_temp.size() == 1);
  Child dead_old = stopped_writer(202);
  std::vector<std::string> after_old = temps();
  kill(dead_old.pid, SIGKILL);
  REQUIRE(reap(dead_old));
  Child dead_fresh = stopped_writer(203);
  kill(dead_fresh.pid, SIGKILL);
  REQUIRE(reap(dead_fresh));
  std::string old_name;
  for (const std::string& name : after_old)
    if (name != live_temp[0])
      old_name = name;
  REQUIRE(!old_name.empty());
  cache::test::set_mtime(root + "/v1/tmp/" + old_name, 7200); // older than the 3600 s default
  REQUIRE(temps().size() == 3);

  // A new process sweeps at start; it also serves its own request.
  llvm::json::Object other = run_helper(
      {"prepare", "--policy", "exact", "--value", "204", "--reference", refs.dir}, env,
      dir / "sweeper");
  CHECK(field(other, "corrupt_loads") == 0);
  std::vector<std::string> left = temps();
  CHECK(left.size() == 2);
  CHECK(std::find(left.begin(), left.end(), old_name) == left.end());
  CHECK(std::find(left.begin(), left.end(), live_temp[0]) != left.end());

  // The live writer finishes its publish untouched.
  kill(live.pid, SIGCONT);
  REQUIRE(reap(live));
  CHECK_MESSAGE(live.exit_code == 0, live.err());
  CHECK(field(json_of(live.out()), "write_failures") == 0);
  std::vector<std::string> final_temps = temps();
  CHECK(final_temps.size() == 1); // the fresh dead writer's, until it is stale
  llvm::json::Object hit = run_helper(
      {"prepare", "--policy", "exact", "--value", "201", "--reference", refs.dir}, env,
      dir / "reader");
  CHECK(field(hit, "disk_hits") == 1);
  CHECK(field(hit, "corrupt_loads") == 0);
  RootCheckResult state = check_root(root, refs.dir);
  CHECK(state.failing_verification == 0);
  CHECK(state.corrupt_loads == 0);
  figures("B2", {{"dead_old_swept", num(int64_t{1})},
                 {"dead_fresh_kept", num(int64_t{1})},
                 {"live_kept_and_published", num(int64_t{live.exit_code == 0})},
                 {"temp_files_left", num(static_cast<int64_t>(final_temps.size()))},
                 {"corrupt_loads", num(field(hit, "corrupt_loads"))}});
}
