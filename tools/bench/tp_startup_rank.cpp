// One rank of `specjit-bench tp-startup`: after the release, an engine on the shared root and
// (on a GPU) the buffers, their inputs drawn on the device; then, once every rank is set up
// (the second release), the warm-up's variants made ready one after another (as a rank's
// start-up does), the warm-up's launches, then the trace. Every time is measured from the
// first release, the instant every rank has started.
#include "tp_startup.h"
#include "tp_startup_data.h"

#include <llvm/Support/raw_ostream.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <time.h>
#include <unistd.h>

namespace specjit::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) { return seconds_since(start) * 1000.0; }

// This process's CPU time: next to a wall time, it tells work from waiting for a core.
double process_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return now.tv_sec * 1000.0 + now.tv_nsec / 1e6;
}

// Blocks until every copy of the pipe's write end is closed: the parent closes its own once all
// ranks are started (or have finished their set-up), so all of them return at the same instant.
void wait_for_release(int fd) {
  char byte = 0;
  ssize_t got;
  do
    got = read(fd, &byte, 1);
  while (got < 0 && errno == EINTR);
  close(fd);
}

// Tells the parent this rank's set-up is done (one byte, then the end closed).
void report_setup_done(int fd) {
  const char byte = 1;
  while (write(fd, &byte, 1) < 0 && errno == EINTR) {
  }
  close(fd);
}

// The device side of a launching rank: a stream and both ops' buffers, their inputs drawn on
// the device (tp_startup_data.h), ready when the constructor returns.
struct Launcher {
  const runtime::Driver& drv;
  CUstream stream = nullptr;
  std::optional<RopeBuffers> rope;
  Setup moe;

  Launcher(const runtime::Driver& driver, const TpPlan& plan, DeviceRandom& random) : drv(driver) {
    must(drv.check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"),
         "stream");
    if (plan.inv_rope)
      rope.emplace(drv, random, plan.largest_tokens(), plan.seed * 100, stream);
    if (plan.moe)
      moe = make_device_moe_setup(drv, random, k_tp_moe_shape, plan.largest_tokens(),
                                  plan.seed * 100 + 50, stream);
    synchronize(); // nothing of the set-up may overlap the ready phase
  }
  ~Launcher() { drv.cuStreamDestroy(stream); }

  // One step of the model: each of the plan's ops at `tokens` tokens.
  void step(runtime::Engine& engine, int64_t tokens) {
    if (rope)
      must(rope->launch(engine, tokens, stream), "inverse-RoPE launch");
    if (moe.buffers)
      must(ops::fused_moe(engine, k_tp_moe_shape, tensors(*moe.buffers, k_tp_moe_shape, tokens),
                          ops::FusedMoeOptions{}, stream),
           "MoE launch");
  }
  void synchronize() {
    must(drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize"), "synchronize");
  }
};

// Makes every request ready (get: loaded on the device; prepare-only: compiled or read).
// Returns the time from `start` at which the first one was ready.
double make_ready(runtime::Engine& engine, const std::vector<runtime::VariantRequest>& requests,
                  bool load, Clock::time_point start) {
  double first_ms = -1;
  for (const runtime::VariantRequest& request : requests) {
    const runtime::KernelId id = must(engine.add_kernel(request.def), "kernel definition");
    if (load)
      must(engine.get(id, request.values), "variant");
    else
      must(engine.prepare(id, request.values), "variant");
    if (first_ms < 0)
      first_ms = ms_since(start);
  }
  return first_ms;
}

llvm::json::Object stats_object(const runtime::EngineStats& s) {
  return llvm::json::Object{{"requests", static_cast<int64_t>(s.requests)},
                            {"memory_hits", static_cast<int64_t>(s.memory_hits)},
                            {"disk_hits", static_cast<int64_t>(s.disk_hits)},
                            {"compiles", static_cast<int64_t>(s.compiles)},
                            {"failures", static_cast<int64_t>(s.failures)},
                            {"corrupt_entries", static_cast<int64_t>(s.corrupt_entries)},
                            {"write_failures", static_cast<int64_t>(s.write_failures)},
                            {"lock_waits", static_cast<int64_t>(s.lock_waits)},
                            {"lock_wait_ms_total", s.lock_wait_ms_total},
                            {"lock_wait_ms_max", s.lock_wait_ms_max}};
}

Config rank_config(const RankArgs& args) {
  Config config = must(Config::from_environment(), "config");
  config.cache_dir.set(args.cache_dir, SettingSource::cli_flag);
  config.readonly_dirs.set({}, SettingSource::cli_flag); // the shared root alone
  config.log.set(args.cache_dir + "/logs/events.jsonl", SettingSource::cli_flag);
  config.device.set(args.device, SettingSource::cli_flag);
  return config;
}

} // namespace

int run_tp_rank(const TpPlan& plan, const RankArgs& args) {
  const Config config = rank_config(args);
  wait_for_release(args.release_fd);
  const Clock::time_point start = Clock::now();
  llvm::json::Object result{
      {"rank", args.rank}, {"device", args.device}, {"pid", static_cast<int64_t>(getpid())}};
  runtime::Engine engine(config);
  std::unique_ptr<DeviceRandom> random;
  std::unique_ptr<Launcher> launcher;
  if (!plan.prepare_only) {
    must(engine.make_context_current(), "context");
    result["context_ms"] = ms_since(start);
    random = std::make_unique<DeviceRandom>(device_random_config(config, args.data_cache_dir));
    launcher = std::make_unique<Launcher>(must(runtime::driver(), "driver"), plan, *random);
  }
  // Before the clock below: the driver's start-up is not a kernel's.
  const runtime::DeviceFacts target = engine.device_facts();
  result["setup_ms"] = ms_since(start);
  // Every rank's set-up done before any ready phase starts, as the ranks of a serving runtime
  // meet (NCCL's set-up, a barrier) after loading their weights: no rank's ready phase is timed
  // while another one still keeps the host or the GPU busy with its set-up.
  const Clock::time_point barrier_start = Clock::now();
  if (args.setup_done_fd >= 0) {
    report_setup_done(args.setup_done_fd);
    wait_for_release(args.ready_release_fd);
  }
  result["barrier_ms"] = ms_since(barrier_start);
  result["ready_start_ms"] = ms_since(start);

  const Clock::time_point ready_start = Clock::now();
  const double ready_cpu_start = process_cpu_ms();
  result["first_ready_ms"] =
      make_ready(engine, tp_variant_requests(plan, target, plan.tokens), !plan.prepare_only, start);
  result["ready_ms"] = ms_since(ready_start);
  result["ready_cpu_ms"] = process_cpu_ms() - ready_cpu_start;
  result["ready_stats"] = stats_object(engine.stats());
  if (launcher) {
    for (int64_t tokens : plan.tokens) {
      launcher->step(engine, tokens);
      if (!result.get("first_launch_ms")) {
        launcher->synchronize();
        result["first_launch_ms"] = ms_since(start);
      }
    }
    launcher->synchronize();
  }
  result["warmup_done_ms"] = ms_since(start);

  const runtime::EngineStats before_trace = engine.stats();
  const Clock::time_point trace_start = Clock::now();
  for (int64_t tokens : plan.trace())
    if (launcher)
      launcher->step(engine, tokens);
    else
      make_ready(engine, tp_variant_requests(plan, target, {tokens}), false, trace_start);
  if (launcher)
    launcher->synchronize();
  result["trace_ms"] = ms_since(trace_start);
  result["trace_compiles"] = static_cast<int64_t>(engine.stats().compiles - before_trace.compiles);
  result["total_ms"] = ms_since(start);
  result["stats"] = stats_object(engine.stats());

  std::error_code ec;
  llvm::raw_fd_ostream out(args.result_path, ec);
  if (ec) {
    llvm::errs() << "specjit-bench tp-startup: rank " << args.rank << " cannot write "
                 << args.result_path << ": " << ec.message() << "\n";
    return 1;
  }
  out << llvm::json::Value(std::move(result)) << "\n";
  return 0;
}

} // namespace specjit::bench
