// R1, R2 (docs/reliability.md): a fleet of nodes with empty local roots behind one real Redis.
// R1: each key is compiled once in the whole fleet. R2: Redis killed in the middle: every node
// finishes with correct entries, compiling locally, and logs remote_down; restarted, later
// nodes use it again.
#include "remote_support.h"

#include <thread>

using namespace specjit;
using namespace specjit::reliability;

TEST_CASE("R1: 16 nodes through one Redis compile each key once in the whole fleet") {
  if (!test::redis_or_skip("R1"))
    return;
  TempDir dir;
  const int nodes = 16;
  const int64_t first = 1, last = 4;
  References refs = make_references(dir, first, last);
  RedisServer server;
  REQUIRE(server.running());
  std::string log = dir / "events.jsonl";
  auto started = std::chrono::steady_clock::now();
  FleetRun run = finish_nodes(start_nodes(dir, "node", nodes, first, last, log,
                                          server.url("lock_ttl_ms=20000"), refs));
  double seconds = seconds_since(started);
  CompileCount count = count_compiles(log);
  CHECK(count.keys == last - first + 1);
  CHECK(count.duplicates == 0);
  CHECK(run.compiles == last - first + 1);
  CHECK(run.compiles + run.remote_hits == nodes * (last - first + 1));
  CHECK(run.failures == 0);
  CHECK(run.corrupt_loads == 0);
  CHECK(run.verified == nodes * (last - first + 1));
  check_node_roots(dir, "node", nodes, refs, last - first + 1);
  figures("R1", {{"nodes", num(int64_t{nodes})},
                 {"keys", num(last - first + 1)},
                 {"compiles", num(run.compiles)},
                 {"remote_hits", num(run.remote_hits)},
                 {"remote_waits", num(events_in(log, "remote_wait"))},
                 {"seconds", num(seconds)}});
}

TEST_CASE("R2: Redis killed mid-run costs local compiles; restarted, it is used again") {
  if (!test::redis_or_skip("R2"))
    return;
  TempDir dir;
  const int nodes = 6;
  const int64_t first = 11, last = 16;
  References refs = make_references(dir, first, last);
  RedisServer server;
  REQUIRE(server.running());
  std::string url = server.url("op_timeout_ms=200&backoff_ms=300&lock_ttl_ms=20000");
  std::string log = dir / "events.jsonl";
  std::vector<Child> children = start_nodes(dir, "node", nodes, first, last, log, url, refs);
  // Killed once the first key is in Redis: the others are still compiling or waiting.
  for (int i = 0; i < 2000 && events_in(log, "compile") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  server.kill();
  FleetRun run = finish_nodes(std::move(children));
  CHECK(run.failures == 0);
  CHECK(run.corrupt_loads == 0);
  CHECK(run.verified == nodes * (last - first + 1));
  check_node_roots(dir, "node", nodes, refs, last - first + 1);
  int64_t downs = events_in(log, "remote_down");
  CHECK(downs >= 1);
  CHECK(downs <= nodes); // once per node, not per request
  // Restarted (empty: no persistence): one node fills it, the next one only fetches.
  REQUIRE(server.start());
  FleetRun refill = finish_nodes(start_nodes(dir, "refill", 1, first, last, log, url, refs));
  CHECK(refill.compiles == last - first + 1);
  FleetRun later = finish_nodes(start_nodes(dir, "later", 1, first, last, log, url, refs));
  CHECK(later.remote_hits == last - first + 1);
  CHECK(later.compiles == 0);
  figures("R2", {{"nodes", num(int64_t{nodes})},
                 {"keys", num(last - first + 1)},
                 {"compiles_while_down", num(run.compiles)},
                 {"remote_hits_before_kill", num(run.remote_hits)},
                 {"remote_down_events", num(downs)},
                 {"later_remote_hits", num(later.remote_hits)}});
}
