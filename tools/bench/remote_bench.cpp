// specjit-bench remote: the fleet tier on one Redis (docs/bench/fleet.md), no GPU needed.
//   warm     one node compiles N variants of scale_tokens and pushes them
//   fresh    a node with an empty local root makes each variant ready (Engine::prepare):
//            fetch + verify + the local copy queued (written behind, no fsync), timed per
//            variant; the copies are verified in its root once its engine is gone
//   fleet    Redis emptied, 16 cold nodes (processes, empty roots) start at once on the same
//            variants: compiles counted from their shared recompilation log
// Without --url it starts its own redis-server on a free loopback port.
#include "bench_common.h"

#include "deploy/log_reader.h"
#include "runtime/test_kernel.h"

#include "cache/disk_store.h"
#include "cache/remote_store.h"

#include "redis_process.h"

#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <memory>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

namespace specjit::bench {

namespace {

Config node_config(const std::string& root, const std::string& log, const std::string& url) {
  Config config = must(Config::from_environment(), "configuration");
  config.cache_dir.set(root, SettingSource::cli_flag);
  config.log.set(log, SettingSource::cli_flag);
  config.arch.set(Arch{9, 0, true}, SettingSource::cli_flag);
  config.storm_threshold.set(1 << 20, SettingSource::cli_flag); // many values on purpose
  config.remote.set(must(parse_remote_url(url), "--url"), SettingSource::cli_flag);
  return config;
}

// Makes every variant ready on one node; the milliseconds of each prepare.
std::vector<double> run_node(const Config& config, int variants) {
  runtime::Engine engine(config);
  runtime::KernelId kernel =
      must(engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::exact())), "kernel");
  std::vector<double> ms;
  for (int v = 1; v <= variants; ++v) {
    auto start = std::chrono::steady_clock::now();
    must(engine.prepare(kernel, {128, v}), "prepare");
    ms.push_back(seconds_since(start) * 1000);
  }
  return ms;
}

int64_t compiles_in(const std::string& log) {
  auto contents = must(deploy::read_log(log), "log");
  int64_t compiles = 0;
  for (const deploy::LogEvent& event : contents.events)
    compiles += event.kind == deploy::EventKind::compile;
  return compiles;
}

// The remote_hit events' ms: fetch and verification, before the local write.
std::vector<double> fetch_ms_in(const std::string& log) {
  std::vector<double> ms;
  for (const deploy::LogEvent& event : must(deploy::read_log(log), "log").events)
    if (event.event == "remote_hit")
      ms.push_back(event.ms);
  return ms;
}

// Entries of the root at `root` that verify (the fresh node's local copies, after its engine
// is gone).
int64_t verified_entries(const std::string& root) {
  cache::DiskStore store(cache::StoreOptions{root});
  auto bad = static_cast<int64_t>(store.verify(/*repair=*/false).size());
  return static_cast<int64_t>(store.list().size()) - bad;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * (values.size() - 1))];
}

} // namespace

int run_remote_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--url", "--variants", "--nodes", "--json"}, {"--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << "specjit-bench remote [--url redis://127.0.0.1:6379/0] [--variants 16]\n"
                    "                     [--nodes 16] [--json docs/bench/fleet.json]\n";
    return 0;
  }
  int64_t variants = 0, nodes = 0;
  if (!parse_count(flags, "remote", "--variants", 1, 1000, 16, variants) ||
      !parse_count(flags, "remote", "--nodes", 1, 256, 16, nodes))
    return 2;
  std::string url = flags.get("--url", "");
  std::unique_ptr<test::RedisProcess> server;
  if (url.empty()) {
    server = std::make_unique<test::RedisProcess>();
    if (!server->running()) {
      llvm::errs() << "specjit-bench remote: cannot start redis-server on a loopback port "
                      "(is it installed?); --url names another server\n";
      return 1;
    }
    url = server->url();
  }
  url += url.find('?') == std::string::npos ? "?lock_ttl_ms=60000" : "";
  ScratchDir scratch("specjit-bench-remote");
  auto remote = std::make_unique<cache::RemoteStore>(must(parse_remote_url(url), "--url"), "");
  must(remote->ping().takeError(), "reaching the remote");
  run_node(node_config(scratch.path() + "/warm", scratch.path() + "/warm.jsonl", url),
           static_cast<int>(variants));
  std::vector<double> fresh =
      run_node(node_config(scratch.path() + "/fresh", scratch.path() + "/fresh.jsonl", url),
               static_cast<int>(variants));
  int64_t fresh_compiles = compiles_in(scratch.path() + "/fresh.jsonl");
  std::vector<double> fetch = fetch_ms_in(scratch.path() + "/fresh.jsonl");
  if (fetch.empty())
    fetch.push_back(0);
  int64_t fresh_local = verified_entries(scratch.path() + "/fresh");
  // The cold fleet: the remote emptied of this benchmark's entries.
  for (const std::string& name : must(remote->scan("specjit:v1:*", SIZE_MAX), "scan"))
    must(remote->remove(name).takeError(), "emptying the remote");
  std::string fleet_log = scratch.path() + "/fleet.jsonl";
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (int64_t n = 0; n < nodes; ++n) {
    pid_t pid = ::fork();
    if (pid == 0) {
      run_node(node_config(scratch.path() + "/node" + std::to_string(n), fleet_log, url),
               static_cast<int>(variants));
      ::_exit(0);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  double fleet_s = seconds_since(start);
  int64_t fleet_compiles = compiles_in(fleet_log);
  server.reset();
  const double later_max =
      fresh.size() > 1 ? *std::max_element(fresh.begin() + 1, fresh.end()) : 0.0;
  fmt::print("fresh node, warm remote: ready per variant median {:.3f} ms, p99 {:.3f} ms, "
             "{} compiles ({} variants)\n",
             median(fresh), percentile(fresh, 0.99), fresh_compiles, variants);
  fmt::print("  first variant (connects, creates the log, starts the writer) {:.3f} ms; the "
             "slowest later one {:.3f} ms\n",
             fresh.front(), later_max);
  fmt::print("  of which fetch + verify: median {:.3f} ms, p99 {:.3f} ms (the rest: the local "
             "miss, queuing the local copy, the log)\n",
             median(fetch), percentile(fetch, 0.99));
  fmt::print("  local copies that verify once the node's engine is gone: {} of {}\n", fresh_local,
             variants);
  fmt::print("{} cold nodes at once: {} compiles for {} distinct keys in {:.2f} s, {} failed\n",
             nodes, fleet_compiles, variants, fleet_s, failed);
  llvm::json::Array per_variant;
  for (double ms : fresh)
    per_variant.push_back(ms);
  llvm::json::Object report{{"variants", variants},
                            {"fresh_ready_ms_median", median(fresh)},
                            {"fresh_ready_ms_p99", percentile(fresh, 0.99)},
                            {"fresh_ready_ms", std::move(per_variant)},
                            // The process's first request also connects to Redis, creates the
                            // log and starts the local copies' writer.
                            {"fresh_first_ready_ms", fresh.front()},
                            {"fresh_later_ready_ms_max", later_max},
                            {"fresh_fetch_verify_ms_median", median(fetch)},
                            {"fresh_fetch_verify_ms_p99", percentile(fetch, 0.99)},
                            {"fresh_compiles", fresh_compiles},
                            {"fresh_local_entries_verified", fresh_local},
                            {"fleet_nodes", nodes},
                            {"fleet_compiles", fleet_compiles},
                            {"fleet_distinct_keys", variants},
                            {"fleet_seconds", fleet_s},
                            {"fleet_failed_nodes", failed}};
  std::string json = flags.get("--json", "");
  if (!json.empty() && !write_report(json, std::move(report)))
    return 1;
  return failed == 0 && fleet_compiles == variants && fresh_compiles == 0 && fresh_local == variants
             ? 0
             : 1;
}

} // namespace specjit::bench
