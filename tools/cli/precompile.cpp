// specjit precompile: make every variant a deployment needs ready in the cache, in parallel,
// without a GPU (Engine::prepare only). Everything is parsed and validated before the first
// compile, so a bad manifest changes nothing.
#include "cli.h"
#include "precompile_jobs.h"
#include "progress.h"
#include "remote_push.h"

#include "deploy/builtin_kernels.h"
#include "deploy/log_reader.h"
#include "deploy/manifest.h"
#include "runtime/engine.h"

#include <llvm/Support/MemoryBuffer.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace specjit::cli {
namespace {

// not_saved: compiled, but the entry is not in the cache (Result::error says why).
enum class Outcome { compiled, reused, failed, not_saved };

struct Result {
  Outcome outcome = Outcome::failed;
  std::string error;
};

struct Target {
  std::optional<Arch> arch;
  std::unique_ptr<runtime::Engine> engine;
};

int parallelism(const Context& context, int& jobs) {
  jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (auto text = context.args.value("-j")) {
    auto parsed = parse_integer_in("-j", *text, k_jobs_range);
    if (!parsed)
      return usage_error(context, llvm::toString(parsed.takeError()));
    jobs = static_cast<int>(*parsed);
  }
  return k_exit_ok;
}

Result run_job(const Job& job, runtime::Engine& engine, runtime::KernelId id) {
  llvm::Expected<const runtime::Variant*> variant =
      job.specs ? engine.prepare_specialized(id, *job.specs) : engine.prepare(id, job.values);
  if (!variant)
    return {Outcome::failed, llvm::toString(variant.takeError())};
  if ((*variant)->source != runtime::VariantSource::compiled)
    return {Outcome::reused, ""};
  if (!(*variant)->not_saved.empty())
    return {Outcome::not_saved, (*variant)->not_saved};
  return {Outcome::compiled, ""};
}

// Registers each job's definition with its target's engine; a definition the engine refuses
// fails its jobs without stopping the others.
std::vector<std::optional<runtime::KernelId>> register_kernels(const std::vector<Job>& jobs,
                                                               std::vector<Target>& targets,
                                                               std::vector<Result>& results) {
  std::vector<std::optional<runtime::KernelId>> ids(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto id = targets[jobs[i].target].engine->add_kernel(jobs[i].def);
    if (id)
      ids[i] = *id;
    else
      results[i] = {Outcome::failed, llvm::toString(id.takeError())};
  }
  return ids;
}

std::vector<Result> run_jobs(const std::vector<Job>& jobs, std::vector<Target>& targets,
                             int workers) {
  std::vector<Result> results(jobs.size());
  std::vector<std::optional<runtime::KernelId>> ids = register_kernels(jobs, targets, results);
  ProgressBar progress(jobs.size(), "variants");
  std::atomic<size_t> next{0}, done{0}, failed{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      if (ids[i])
        results[i] = run_job(jobs[i], *targets[jobs[i].target].engine, *ids[i]);
      failed += results[i].outcome == Outcome::failed;
      progress.update(++done, failed);
    }
  };
  std::vector<std::thread> threads;
  size_t count = std::min<size_t>(static_cast<size_t>(workers), jobs.size());
  for (size_t t = 1; t < count; ++t)
    threads.emplace_back(work);
  work();
  for (std::thread& thread : threads)
    thread.join();
  return results;
}

struct Tally {
  size_t compiled = 0, reused = 0, failed = 0, not_saved = 0;
  llvm::json::Array failures, unsaved;
  std::map<std::string, size_t> unsaved_reasons; // why -> how many
};

Tally tally(const Context& context, const std::vector<Job>& jobs,
            const std::vector<Target>& targets, const std::vector<Result>& results) {
  Tally t;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Result& result = results[i];
    t.compiled += result.outcome == Outcome::compiled;
    t.reused += result.outcome == Outcome::reused;
    if (result.outcome != Outcome::failed && result.outcome != Outcome::not_saved)
      continue;
    bool failed = result.outcome == Outcome::failed;
    std::string arch = targets[jobs[i].target].engine->arch().name();
    (failed ? t.failures : t.unsaved)
        .push_back(llvm::json::Object{{"kernel", jobs[i].def.id},
                                      {"variant", jobs[i].label},
                                      {"arch", arch},
                                      {failed ? "error" : "reason", result.error}});
    if (failed) {
      ++t.failed;
    } else {
      ++t.not_saved;
      ++t.unsaved_reasons[result.error];
    }
    if (!context.json)
      fmt::print(stderr, "{}: {} {} ({}): {}\n", failed ? "failed" : "not saved", jobs[i].def.id,
                 jobs[i].label, arch, result.error);
  }
  return t;
}

llvm::json::Array skipped_json(const std::vector<SkippedKernel>& skipped) {
  llvm::json::Array out;
  for (const SkippedKernel& s : skipped)
    out.push_back(llvm::json::Object{{"kernel", s.kernel},
                                     {"events", static_cast<int64_t>(s.events)},
                                     {"reason", s.reason},
                                     {"first", s.first_at}});
  return out;
}

void print_summary(const Context& context, const PlannedJobs& plan, const Tally& t,
                   const std::vector<std::string>& arch_names, double seconds) {
  std::string names;
  for (const std::string& arch : arch_names)
    names += (names.empty() ? "" : ", ") + arch;
  fmt::print("precompiled {} variants for {}: {} compiled, {} reused, {} failed{} in {:.2f} s\n",
             plan.jobs.size(), names.empty() ? "no target" : names, t.compiled, t.reused, t.failed,
             t.not_saved ? fmt::format(", {} not saved", t.not_saved) : "", seconds);
  for (const auto& [why, count] : t.unsaved_reasons)
    warn(context, fmt::format("{} compiled variant{} not saved: {}", count,
                              count == 1 ? " was" : "s were", why));
  for (const SkippedKernel& s : plan.skipped)
    warn(context, fmt::format("skipped {} log event{} of kernel '{}' ({}; first at {})", s.events,
                              s.events == 1 ? "" : "s", s.kernel, s.reason, s.first_at));
}

// 0 when every variant is in the cache (compiled and saved, or reused); events of kernels a
// --from-log replay cannot rebuild are skipped and reported, and do not change the exit code.
int report(const Context& context, const PlannedJobs& plan, const std::vector<Target>& targets,
           const std::vector<Result>& results, double seconds) {
  Tally t = tally(context, plan.jobs, targets, results);
  std::vector<std::string> arch_names;
  llvm::json::Array arches;
  for (const Target& target : targets)
    if (target.engine) {
      arch_names.push_back(target.engine->arch().name());
      arches.push_back(arch_names.back());
    }
  size_t skipped_events = 0;
  for (const SkippedKernel& s : plan.skipped)
    skipped_events += s.events;
  if (context.json)
    print_json(llvm::json::Object{{"variants", static_cast<int64_t>(plan.jobs.size())},
                                  {"compiled", static_cast<int64_t>(t.compiled)},
                                  {"reused", static_cast<int64_t>(t.reused)},
                                  {"failed", static_cast<int64_t>(t.failed)},
                                  {"not_saved", static_cast<int64_t>(t.not_saved)},
                                  {"skipped_events", static_cast<int64_t>(skipped_events)},
                                  {"seconds", seconds},
                                  {"arches", std::move(arches)},
                                  {"failures", std::move(t.failures)},
                                  {"unsaved", std::move(t.unsaved)},
                                  {"skipped", skipped_json(plan.skipped)}});
  else
    print_summary(context, plan, t, arch_names, seconds);
  return t.failed == 0 && t.not_saved == 0 ? k_exit_ok : k_exit_problems;
}

// Every entry of the root goes to the remote, compiled now or before; said on stderr so that
// --json's one object on stdout stays the precompile report.
int push_after_precompile(Context& context, cache::RemoteStore& remote, int code) {
  PushResult pushed = push_local_entries(context, remote);
  fmt::print(stderr, "specjit precompile: pushed {} entries to {}, {} already there, {} failed{}\n",
             pushed.pushed, remote.url().redacted(), pushed.present, pushed.failed,
             pushed.failed ? " (" + pushed.first_failure + ")" : "");
  return pushed.failed == 0 && pushed.skipped == 0 ? code : k_exit_problems;
}

int run_precompile(Context& context) {
  int workers = 1;
  if (int code = parallelism(context, workers))
    return code;
  std::vector<std::optional<Arch>> arches;
  for (const std::string& text : context.args.all("--arch")) {
    auto arch = Arch::parse(text);
    if (!arch)
      return usage_error(context, llvm::toString(arch.takeError()));
    arches.push_back(*arch);
  }
  // --push (image builders): the remote must be writable before anything is compiled.
  std::unique_ptr<cache::RemoteStore> push_to;
  if (context.args.has("--push")) {
    auto remote = writable_remote(context);
    if (!remote)
      return report_error(context, remote.takeError(), k_exit_usage);
    push_to = std::move(*remote);
  }
  PlannedJobs plan;
  if (auto err = plan_jobs(context, arches, plan))
    return report_error(context, std::move(err), k_exit_usage);
  std::vector<Target> created;
  std::vector<std::string> arch_names;
  for (const std::optional<Arch>& arch : plan.targets) {
    Config config = context.config;
    // Strict mode guards serving processes; precompile exists to fill the cache it guards.
    config.strict.set(StrictMode::off, SettingSource::cli_flag);
    if (arch)
      config.arch.set(*arch, SettingSource::cli_flag);
    created.push_back({arch, std::make_unique<runtime::Engine>(config)});
    arch_names.push_back(created.back().engine->arch().name());
  }
  std::vector<size_t> kept;
  merge_targets(plan, arch_names, kept);
  std::vector<Target> targets(created.size()); // indices stay valid; unused ones stay empty
  for (size_t index : kept)
    targets[index] = std::move(created[index]);
  auto start = std::chrono::steady_clock::now();
  std::vector<Result> results = run_jobs(plan.jobs, targets, workers);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int code = report(context, plan, targets, results, seconds);
  return push_to ? push_after_precompile(context, *push_to, code) : code;
}

} // namespace

std::vector<Command> precompile_commands() {
  return {
      {"precompile",
       "compile every variant a manifest, a log or the built-in defaults need (no GPU needed)",
       "precompile [--manifest FILE]... [--model NAME]... [--from-log FILE]... [--arch A]... "
       "[-j N] [--json]",
       "  --manifest FILE     variants or models to precompile (docs/manifest.md); "
       "repeatable;\n"
       "                      without --manifest, --model and --from-log: every reference\n"
       "                      model (the built-in default manifest)\n"
       "  --model NAME        a reference model's built-in ops (docs/deploy.md): qwen3-30b-a3b,\n"
       "                      mixtral-8x7b, deepseek-v3-tp8, deepseek-v4-attention; "
       "repeatable\n"
       "  --from-log FILE     replay the variants a run compiled or loaded (its events.jsonl,\n"
       "                      rotated files too); kernels it cannot rebuild are skipped\n"
       "  --arch A            target architecture, e.g. sm_90a; repeatable (one pass each)\n"
       "  -j N                parallel compiles (default: number of cores)\n"
       "  --push              then store every entry of the root in the remote\n"
       "                      (SPECJIT_REMOTE, mode=rw; docs/fleet.md)\n",
       "specjit precompile --manifest deploy.json --arch sm_90a -j 8",
       {{"--manifest", true, true},
        {"--model", true, true},
        {"--from-log", true, true},
        {"--arch", true, true},
        {"-j", true, false},
        {"--push", false, false}},
       0,
       0,
       run_precompile}};
}

} // namespace specjit::cli
