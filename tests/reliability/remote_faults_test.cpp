// R3-R6 (docs/reliability.md): a remote that is slow, holds garbage, forgets, or whose lock
// holder dies costs a bounded wait and a miss, never a failed or corrupt load.
#include "remote_support.h"

#include "cache/remote_store.h"
#include "cache/remote_value.h"

#include <thread>

using namespace specjit;
using namespace specjit::reliability;

namespace {

std::unique_ptr<cache::RemoteStore> direct(const std::string& url) {
  auto parsed = parse_remote_url(url);
  REQUIRE(parsed);
  return std::make_unique<cache::RemoteStore>(*parsed, "");
}

double sum_ms(const std::string& log, const std::string& name) {
  double total = 0;
  for (const llvm::json::Object& event : test::events_named(test::read_json_lines(log), name))
    total += event.getNumber("ms").getValueOr(0);
  return total;
}

} // namespace

TEST_CASE("R3: a paused Redis costs one operation timeout, then the back-off skips it") {
  if (!test::redis_or_skip("R3"))
    return;
  TempDir dir;
  const int64_t first = 21, last = 23, timeout_ms = 200;
  References refs = make_references(dir, first, last);
  RedisServer server;
  std::string log = dir / "events.jsonl";
  server.cli({"CLIENT", "PAUSE", "20000", "ALL"});
  FleetRun run = finish_nodes(start_nodes(
      dir, "node", 1, first, last, log,
      server.url("op_timeout_ms=" + std::to_string(timeout_ms) + "&backoff_ms=60000"), refs));
  server.cli({"CLIENT", "UNPAUSE"});
  CHECK(run.compiles == last - first + 1);
  CHECK(run.failures == 0);
  CHECK(events_in(log, "remote_down") == 1);
  // Everything the node did besides compiling: one timeout and the local work. The local work
  // is measured by the same node without a remote, right after (a loaded machine slows both),
  // so that what is left is what the remote cost: one timeout, never one per request.
  double total_ms = run.results[0].getNumber("ms").getValueOr(0);
  double overhead_ms = total_ms - sum_ms(log, "compile");
  std::string baseline_log = dir / "baseline-events.jsonl";
  FleetRun baseline =
      finish_nodes(start_nodes(dir, "baseline", 1, first, last, baseline_log, "", refs));
  REQUIRE(baseline.compiles == last - first + 1);
  double local_ms =
      baseline.results[0].getNumber("ms").getValueOr(0) - sum_ms(baseline_log, "compile");
  double remote_ms = overhead_ms - local_ms;
  CHECK(remote_ms < 1.5 * timeout_ms); // two timeouts would be 2 x timeout_ms
  CHECK(remote_ms > 0.5 * timeout_ms); // and the timeout was really waited for
  figures("R3", {{"op_timeout_ms", num(timeout_ms)},
                 {"requests", num(last - first + 1)},
                 {"overhead_ms", num(overhead_ms)},
                 {"local_work_ms", num(local_ms)},
                 {"remote_ms", num(remote_ms)},
                 {"remote_down_events", num(events_in(log, "remote_down"))}});
}

TEST_CASE("R4: flipped, truncated and swapped values in Redis are never loaded") {
  if (!test::redis_or_skip("R4"))
    return;
  TempDir dir;
  const int64_t first = 31, last = 33;
  References refs = make_references(dir, first, last);
  RedisServer server;
  std::string log = dir / "events.jsonl";
  FleetRun fill = finish_nodes(start_nodes(dir, "fill", 1, first, last, log, server.url(), refs));
  REQUIRE(fill.compiles == 3);
  auto remote = direct(server.url());
  auto names = remote->scan(cache::remote_entry_pattern(), 100);
  REQUIRE(names);
  REQUIRE(names->size() == 3);
  std::vector<std::string> values;
  for (const std::string& name : *names)
    values.push_back(**remote->get(name, 1 << 30));
  std::string flipped = values[0];
  flipped[flipped.size() / 2] ^= 0x10;
  REQUIRE(remote->set((*names)[0], flipped, false).get());
  REQUIRE(remote->set((*names)[1], values[1].substr(0, values[1].size() - 7), false).get());
  REQUIRE(remote->set((*names)[2], values[0], false).get()); // another key's valid value
  FleetRun run = finish_nodes(start_nodes(dir, "node", 2, first, last, log, server.url(), refs));
  // No planted value is used: every key is recompiled, once per key at least; a node that waited
  // on the fleet lock may then take the value the compiling node pushed (a good one).
  CHECK(run.compiles >= 3);
  CHECK(run.compiles + run.remote_hits == 6);
  CHECK(run.corrupt_loads == 0);
  CHECK(run.failures == 0);
  CHECK(run.verified == 6);
  CHECK(events_in(log, "remote_corrupt") >= 3);
  check_node_roots(dir, "node", 2, refs, 3);
  figures("R4", {{"planted", "3"},
                 {"remote_corrupt_events", num(events_in(log, "remote_corrupt"))},
                 {"corrupt_loads", num(run.corrupt_loads)}});
}

TEST_CASE("R5: a Redis smaller than the working set, evicting LRU under load, only misses") {
  if (!test::redis_or_skip("R5"))
    return;
  TempDir dir;
  const int64_t first = 41, last = 52;
  References refs = make_references(dir, first, last);
  RedisServer server({"--maxmemory-policy", "allkeys-lru"});
  // Filler keys first: the working set never fits beside them, so LRU must evict.
  auto remote = direct(server.url());
  std::string info = remote->info().get();
  size_t at = info.find("used_memory:");
  int64_t used = std::atoll(info.c_str() + at + 12);
  int64_t entry_bytes = static_cast<int64_t>(test::read_file(refs.dir + "/" + refs.keys[0] +
                                                             ".cubin").size());
  int64_t limit = used + entry_bytes * 10 + (256 << 10); // and the clients' buffers
  server.cli({"CONFIG", "SET", "maxmemory", std::to_string(limit)});
  for (int i = 0; i < 64; ++i)
    REQUIRE(remote->set("filler:" + std::to_string(i), std::string(8192, 'f'), false));
  std::string log = dir / "events.jsonl";
  FleetRun run = finish_nodes(start_nodes(dir, "node", 4, first, last, log, server.url(), refs));
  int64_t requests = 4 * (last - first + 1);
  CHECK(run.failures == 0);
  CHECK(run.corrupt_loads == 0);
  CHECK(run.verified == requests);
  CHECK(run.compiles + run.remote_hits == requests);
  CHECK(events_in(log, "remote_corrupt") == 0);
  std::string after = remote->info().get();
  int64_t evicted = std::atoll(after.c_str() + after.find("evicted_keys:") + 13);
  CHECK(evicted > 0);
  check_node_roots(dir, "node", 4, refs, last - first + 1);
  figures("R5", {{"maxmemory_over_empty", num(limit - used)},
                 {"working_set_keys", num(last - first + 1)},
                 {"evicted_keys", num(evicted)},
                 {"compiles", num(run.compiles)},
                 {"remote_hits", num(run.remote_hits)}});
}

TEST_CASE("R6: a lock holder SIGKILLed costs the lock's expiry; no key compiles twice more") {
  if (!test::redis_or_skip("R6"))
    return;
  TempDir dir;
  const int waiters = 4;
  const int64_t value = 61, ttl_ms = 1500;
  References refs = make_references(dir, value, value);
  RedisServer server;
  std::string url = server.url("lock_ttl_ms=" + std::to_string(ttl_ms));
  std::string log = dir / "events.jsonl";
  // The holder stops inside its local write: compiled, fleet lock held, nothing pushed.
  Child holder = spawn({"prepare", "--policy", "exact", "--value", std::to_string(value),
                        "--stop-in-write"},
                       node_env(dir, "holder", log, url), dir / "holder");
  REQUIRE(wait_stopped(holder));
  std::vector<Child> children = start_nodes(dir, "node", waiters, value, value, log, url, refs);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(holder.pid, SIGKILL);
  REQUIRE(reap(holder));
  FleetRun run = finish_nodes(std::move(children));
  CompileCount count = count_compiles(log);
  CHECK(count.keys == 1);
  CHECK(count.compiles <= 2); // the dead holder's and one waiter's
  CHECK(run.compiles == 1);
  CHECK(run.remote_hits == waiters - 1);
  CHECK(run.corrupt_loads == 0);
  double slowest = 0;
  for (const Child& child : run.children)
    slowest = std::max(slowest, child.finished_after_s);
  CHECK(slowest < ttl_ms / 1000.0 + 10.0);
  check_node_roots(dir, "node", waiters, refs, 1);
  figures("R6", {{"waiters", num(int64_t{waiters})},
                 {"lock_ttl_ms", num(ttl_ms)},
                 {"slowest_waiter_s", num(slowest)},
                 {"compiles_total", num(count.compiles)}});
}
