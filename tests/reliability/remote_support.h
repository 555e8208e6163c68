// Shared pieces of the fleet tier's reliability tests (docs/fleet.md, RELIABILITY.md promise
// 10): nodes are helper processes with their own empty cache roots and one shared log, talking
// to a real redis-server started by the test.
#pragma once

#include "redis_server.h"
#include "reliability_support.h"

#include <map>

namespace specjit::reliability {

using test::RedisServer;

// The environment of one node: its own root, the shared log, the remote.
inline std::vector<std::string> node_env(const TempDir& dir, const std::string& node,
                                         const std::string& log, const std::string& url) {
  // An empty url: a node without the fleet tier (a baseline).
  if (url.empty())
    return env_for(dir / (node + "-cache"), log, {});
  return env_for(dir / (node + "-cache"), log, {"SPECJIT_REMOTE=" + url});
}

// Starts `count` nodes preparing scale_tokens<128, v> for v in [first, last] under policy exact,
// all released at once by a start file; reaps them and sums their counters.
struct FleetRun {
  std::vector<Child> children;
  std::vector<llvm::json::Object> results;
  int64_t compiles = 0, remote_hits = 0, disk_hits = 0, failures = 0, corrupt_loads = 0,
          verified = 0;
};

inline std::vector<Child> start_nodes(const TempDir& dir, const std::string& name, int count,
                                      int64_t first, int64_t last, const std::string& log,
                                      const std::string& url, const References& refs) {
  std::string start = dir / (name + "-start");
  std::vector<Child> children;
  for (int n = 0; n < count; ++n) {
    std::string node = name + std::to_string(n);
    children.push_back(spawn({"prepare", "--policy", "exact", "--first", std::to_string(first),
                              "--last", std::to_string(last), "--shuffle", std::to_string(n),
                              "--reference", refs.dir, "--start-file", start},
                             node_env(dir, node, log, url), dir / node));
  }
  touch(start);
  return children;
}

inline FleetRun finish_nodes(std::vector<Child> children) {
  FleetRun run;
  for (Child& child : children) {
    REQUIRE(reap(child));
    CHECK_MESSAGE(child.exit_code == 0, child.err());
    llvm::json::Object result = json_of(child.out());
    REQUIRE_MESSAGE(!result.empty(), child.err());
    run.compiles += field(result, "compiles");
    run.remote_hits += field(result, "remote_hits");
    run.disk_hits += field(result, "disk_hits");
    run.failures += field(result, "failures");
    run.corrupt_loads += field(result, "corrupt_loads");
    run.verified += field(result, "verified");
    run.results.push_back(std::move(result));
  }
  run.children = std::move(children);
  return run;
}

inline int64_t events_in(const std::string& log, const std::string& name) {
  struct stat st;
  if (stat(log.c_str(), &st) != 0)
    return 0;
  return static_cast<int64_t>(test::events_named(test::read_json_lines(log), name).size());
}

// Every node's root verifies and matches the references.
inline void check_node_roots(const TempDir& dir, const std::string& name, int count,
                             const References& refs, int64_t entries_each) {
  for (int n = 0; n < count; ++n) {
    RootCheckResult state = check_root(dir / (name + std::to_string(n) + "-cache"), refs.dir);
    CHECK(state.entries == entries_each);
    CHECK(state.failing_verification == 0);
    CHECK(state.corrupt_loads == 0);
  }
}

} // namespace specjit::reliability
