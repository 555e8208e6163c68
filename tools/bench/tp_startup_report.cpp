// The parent's reading of one tp-startup run: the recompilation log says which keys each rank
// compiled or read and how long every compile took; the ranks' results say how long each waited.
#include "tp_startup.h"

#include "deploy/log_reader.h"

#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace specjit::bench {

namespace {

// The warm run's bound on each rank's kernel time-to-ready (all its warm-up variants ready).
constexpr double k_warm_ready_ms = 50.0;
// A wait may exceed the slowest compile it depends on by this fraction.
constexpr double k_wait_slack = 0.10;

struct PidEvents {
  int64_t compiles = 0;
  double slowest_compile_ms = 0;
  std::set<std::string> keys; // compiled or read from disk
};

struct LogFacts {
  std::map<std::string, double> compile_ms; // per key, its slowest compile in the whole log
  std::map<int64_t, PidEvents> by_pid;
  std::set<std::string> compiled_keys; // by this run's ranks
  int64_t compile_events = 0;          // by this run's ranks
};

LogFacts read_facts(const deploy::LogContents& log, const std::set<int64_t>& pids) {
  LogFacts facts;
  for (const deploy::LogEvent& event : log.events) {
    const bool compile = event.kind == deploy::EventKind::compile;
    if (compile)
      facts.compile_ms[event.key] = std::max(facts.compile_ms[event.key], event.ms);
    if (!pids.count(event.pid) || (!compile && event.kind != deploy::EventKind::disk_hit))
      continue;
    PidEvents& mine = facts.by_pid[event.pid];
    mine.keys.insert(event.key);
    if (!compile)
      continue;
    ++mine.compiles;
    mine.slowest_compile_ms = std::max(mine.slowest_compile_ms, event.ms);
    facts.compiled_keys.insert(event.key);
    ++facts.compile_events;
  }
  return facts;
}

double number(const llvm::json::Object& object, llvm::StringRef name) {
  return object.getNumber(name).getValueOr(0);
}
double stat(const llvm::json::Object& rank, llvm::StringRef name) {
  const llvm::json::Object* stats = rank.getObject("stats");
  return stats ? number(*stats, name) : 0;
}

// Adds the log's view of one rank: its slowest own compile, the slowest compile of any key it
// needed (its own or another rank's), and whether its longest lock wait went past that + 10 %.
void add_dependencies(llvm::json::Object& rank, const LogFacts& facts) {
  const int64_t pid = rank.getInteger("pid").getValueOr(-1);
  auto found = facts.by_pid.find(pid);
  const PidEvents none;
  const PidEvents& mine = found == facts.by_pid.end() ? none : found->second;
  double depends_ms = 0;
  for (const std::string& key : mine.keys)
    if (auto it = facts.compile_ms.find(key); it != facts.compile_ms.end())
      depends_ms = std::max(depends_ms, it->second);
  rank["log_compiles"] = mine.compiles;
  rank["slowest_compile_ms"] = mine.slowest_compile_ms;
  rank["depends_slowest_compile_ms"] = depends_ms;
  rank["waited_too_long"] = stat(rank, "lock_waits") > 0 &&
                            stat(rank, "lock_wait_ms_max") > (1 + k_wait_slack) * depends_ms;
}

} // namespace

llvm::json::Object analyse_tp_run(const std::string& phase, std::vector<llvm::json::Object> ranks,
                                  const std::string& log_path) {
  std::set<int64_t> pids;
  for (const llvm::json::Object& rank : ranks)
    pids.insert(rank.getInteger("pid").getValueOr(-1));
  deploy::LogContents log;
  llvm::json::Object run{{"phase", phase}, {"log", log_path}};
  if (auto read = deploy::read_log(log_path))
    log = std::move(*read);
  else
    run["log_error"] = llvm::toString(read.takeError());
  const LogFacts facts = read_facts(log, pids);

  int64_t compiles = 0;
  bool waits_bounded = true, zero_compiles = true;
  double max_ready_ms = 0, max_wait_ms = 0;
  llvm::json::Array rank_rows;
  for (llvm::json::Object& rank : ranks) {
    add_dependencies(rank, facts);
    compiles += static_cast<int64_t>(stat(rank, "compiles"));
    zero_compiles = zero_compiles && stat(rank, "compiles") == 0;
    waits_bounded = waits_bounded && !*rank.getBoolean("waited_too_long");
    max_ready_ms = std::max(max_ready_ms, number(rank, "ready_ms"));
    max_wait_ms = std::max(max_wait_ms, stat(rank, "lock_wait_ms_max"));
    rank_rows.push_back(std::move(rank));
  }
  const auto distinct = static_cast<int64_t>(facts.compiled_keys.size());
  const bool compiles_once = compiles == distinct && facts.compile_events == distinct;
  const bool ready_fast = max_ready_ms < k_warm_ready_ms;
  run["ranks"] = std::move(rank_rows);
  run["totals"] = llvm::json::Object{{"compiles", compiles},
                                     {"compile_events", facts.compile_events},
                                     {"distinct_keys_compiled", distinct},
                                     {"max_ready_ms", max_ready_ms},
                                     {"max_lock_wait_ms", max_wait_ms},
                                     {"log_bad_lines", static_cast<int64_t>(log.bad_lines)}};
  run["checks"] = llvm::json::Object{{"compiles_once_across_ranks", compiles_once},
                                     {"waits_within_slowest_compile_plus_10pct", waits_bounded},
                                     {"zero_compiles", zero_compiles},
                                     {"ready_under_50ms", ready_fast}};
  // The acceptance: cold, each key compiled once and no wait past its bound; warm, no
  // compile and every rank ready within 50 ms.
  run["pass"] = phase == "cold" ? compiles_once && waits_bounded : zero_compiles && ready_fast;
  return run;
}

void print_tp_run(const llvm::json::Object& run) {
  const std::string phase = run.getString("phase")->str();
  std::printf("%-5s %4s %3s %9s %9s %9s %9s %8s %5s %5s %9s %10s %9s %9s\n", "run", "rank", "dev",
              "first_ms", "ready_ms", "ready_cpu", "total_ms", "compiles", "disk", "waits",
              "wait_max", "wait_total", "slowest", "dep_slow");
  for (const llvm::json::Value& value : *run.getArray("ranks")) {
    const llvm::json::Object& rank = *value.getAsObject();
    // With launches, the first completed one; prepare-only, the first variant ready.
    const double first =
        rank.getNumber("first_launch_ms").getValueOr(number(rank, "first_ready_ms"));
    std::printf("%-5s %4lld %3lld %9.1f %9.1f %9.1f %9.1f", phase.c_str(),
                static_cast<long long>(*rank.getInteger("rank")),
                static_cast<long long>(*rank.getInteger("device")), first, number(rank, "ready_ms"),
                number(rank, "ready_cpu_ms"), number(rank, "total_ms"));
    std::printf(" %8.0f %5.0f %5.0f %9.1f %10.1f %9.1f %9.1f%s\n", stat(rank, "compiles"),
                stat(rank, "disk_hits"), stat(rank, "lock_waits"), stat(rank, "lock_wait_ms_max"),
                stat(rank, "lock_wait_ms_total"), number(rank, "slowest_compile_ms"),
                number(rank, "depends_slowest_compile_ms"),
                *rank.getBoolean("waited_too_long") ? "  waited too long" : "");
  }
  const llvm::json::Object& totals = *run.getObject("totals");
  std::printf("%s: %lld compiles across ranks, %lld distinct keys compiled (%lld compile events); "
              "max ready %.1f ms, max lock wait %.1f ms: %s\n",
              phase.c_str(), static_cast<long long>(*totals.getInteger("compiles")),
              static_cast<long long>(*totals.getInteger("distinct_keys_compiled")),
              static_cast<long long>(*totals.getInteger("compile_events")),
              *totals.getNumber("max_ready_ms"), *totals.getNumber("max_lock_wait_ms"),
              *run.getBoolean("pass") ? "PASS" : "FAIL");
  if (auto error = run.getString("log_error"))
    std::printf("%s: the log could not be read: %s\n", phase.c_str(), error->str().c_str());
}

} // namespace specjit::bench
