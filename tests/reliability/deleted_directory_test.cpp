// D3 (RELIABILITY.md): the cache directory is deleted, over and over, while a process
// compiles and publishes into it. No request fails, no crash, nothing corrupt is loaded, and
// the root is recreated by the next publish.
#include "reliability_support.h"

#include <thread>

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("D3: a cache directory deleted while running is recreated; nothing fails") {
  TempDir dir;
  const int variants = sized(12, 40);
  References refs = make_references(dir, 1, variants + 1);
  std::string root = dir / "cache", log = dir / "events.jsonl";
  Child child = spawn({"prepare", "--policy", "exact", "--first", "1", "--last",
                       std::to_string(variants), "--threads", "2", "--reference", refs.dir},
                      env_for(root, log), dir / "run");
  REQUIRE(child.pid > 0);
  int deletions = 0;
  for (;;) {
    int status = 0;
    pid_t done = waitpid(child.pid, &status, WNOHANG);
    if (done == child.pid) {
      child.finished_after_s = seconds_since(child.started);
      child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      child.signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      break;
    }
    struct stat st;
    if (stat(root.c_str(), &st) == 0) {
      // rm may race with the process recreating directories ("not empty"): try again later.
      std::string command = "rm -rf '" + root + "' 2>/dev/null";
      deletions += std::system(command.c_str()) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK_MESSAGE(child.exit_code == 0, child.err());
  CHECK(child.signal_number == 0);
  llvm::json::Object result = json_of(child.out());
  REQUIRE(!result.empty());
  CHECK(field(result, "failures") == 0);
  CHECK(field(result, "verified") == variants);
  CHECK(field(result, "corrupt_loads") == 0);
  CHECK(deletions > 0);
  // A new process recreates the root with its publish.
  llvm::json::Object after = run_helper({"prepare", "--policy", "exact", "--value",
                                         std::to_string(variants + 1), "--reference", refs.dir},
                                        env_for(root, log), dir / "after");
  CHECK(field(after, "write_failures") == 0);
  RootCheckResult state = check_root(root, refs.dir);
  CHECK(state.entries >= 1);
  CHECK(state.failing_verification + state.corrupt_loads + state.unverified == 0);
  figures("D3", {{"variants", num(int64_t{variants})},
                 {"deletions", num(int64_t{deletions})},
                 {"requests_served", num(field(result, "verified"))},
                 {"write_failed", num(field(result, "write_failures"))},
                 {"corrupt_loads", num(field(result, "corrupt_loads"))},
                 {"recreated", num(int64_t{state.entries >= 1})}});
}
