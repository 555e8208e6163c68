// specjit precompile: make every variant a deployment needs ready in the cache, in parallel,
// without a GPU (Engine::prepare only). Everything is parsed and validated before the first
// compile, so a bad manifest changes nothing.
#include "cli.h"
#include "precompile_jobs.h"
#include "remote_push.h"

#include "runtime/builtin_kernels.h"
#include "runtime/engine.h"
#include "runtime/log_reader.h"
#include "runtime/manifest.h"

#include <llvm/Support/MemoryBuffer.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace specjit::cli {
namespace {

// Redraws one line on a terminal's stderr, at most ten times a second.
class ProgressBar {
public:
  explicit ProgressBar(size_t total) : m_total(total), m_enabled(isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() {
    if (m_enabled && m_drawn)
      std::fputs("\r\033[K", stderr);
  }

  void update(size_t done, size_t failed) {
    if (!m_enabled)
      return;
    std::lock_guard<std::mutex> guard(m_mutex);
    auto now = std::chrono::steady_clock::now();
    if (m_drawn && done < m_total && now - m_last < std::chrono::milliseconds(100))
      return;
    m_last = now;
    m_drawn = true;
    constexpr size_t k_width = 30;
    size_t filled = m_total == 0 ? k_width : done * k_width / m_total;
    fmt::print(stderr, "\r[{}{}] {}/{} variants{}", std::string(filled, '#'),
               std::string(k_width - filled, ' '), done, m_total,
               failed ? fmt::format(", {} failed", failed) : "");
    std::fflush(stderr);
  }

private:
  size_t m_total;
  bool m_enabled;
  bool m_drawn = false;
  std::mutex m_mutex;
  std::chrono::steady_clock::time_point m_last;
};

enum class Outcome { compiled, reused, failed };

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
    if (llvm::StringRef(*text).getAsInteger(10, jobs) || jobs < 1)
      return usage_error(context, fmt::format("-j needs a positive number, not '{}'", *text));
  }
  return k_exit_ok;
}

Result run_job(const Job& job, runtime::Engine& engine, runtime::KernelId id) {
  llvm::Expected<const runtime::Variant*> variant =
      job.specs ? engine.prepare_specialized(id, *job.specs) : engine.prepare(id, job.values);
  if (!variant)
    return {Outcome::failed, llvm::toString(variant.takeError())};
  bool compiled = (*variant)->source == runtime::VariantSource::compiled;
  return {compiled ? Outcome::compiled : Outcome::reused, ""};
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
  ProgressBar progress(jobs.size());
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

int report(const Context& context, const std::vector<Job>& jobs, const std::vector<Target>& targets,
           const std::vector<Result>& results, double seconds) {
  size_t compiled = 0, reused = 0, failed = 0;
  llvm::json::Array failures;
  for (size_t i = 0; i < jobs.size(); ++i) {
    compiled += results[i].outcome == Outcome::compiled;
    reused += results[i].outcome == Outcome::reused;
    if (results[i].outcome != Outcome::failed)
      continue;
    ++failed;
    std::string arch = targets[jobs[i].target].engine->arch().name();
    failures.push_back(llvm::json::Object{{"kernel", jobs[i].def.id},
                                          {"variant", jobs[i].label},
                                          {"arch", arch},
                                          {"error", results[i].error}});
    if (!context.json)
      fmt::print(stderr, "failed: {} {} ({}): {}\n", jobs[i].def.id, jobs[i].label, arch,
                 results[i].error);
  }
  llvm::json::Array arches;
  const runtime::Engine* unwritable = nullptr;
  for (const Target& target : targets) {
    if (!target.engine)
      continue;
    arches.push_back(target.engine->arch().name());
    if (!target.engine->disk_writable())
      unwritable = target.engine.get();
  }
  if (context.json) {
    print_json(llvm::json::Object{{"variants", static_cast<int64_t>(jobs.size())},
                                  {"compiled", static_cast<int64_t>(compiled)},
                                  {"reused", static_cast<int64_t>(reused)},
                                  {"failed", static_cast<int64_t>(failed)},
                                  {"seconds", seconds},
                                  {"arches", std::move(arches)},
                                  {"failures", std::move(failures)}});
  } else {
    std::string names;
    for (const llvm::json::Value& arch : arches)
      names += (names.empty() ? "" : ", ") + arch.getAsString()->str();
    fmt::print("precompiled {} variants for {}: {} compiled, {} reused, {} failed in {:.2f} s\n",
               jobs.size(), names.empty() ? "no target" : names, compiled, reused, failed, seconds);
    if (unwritable != nullptr)
      warn(context, "the cache cannot be written (" + unwritable->disk_unusable_reason() +
                        "); nothing was persisted");
  }
  return failed == 0 ? k_exit_ok : k_exit_problems;
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
  int code = report(context, plan.jobs, targets, results, seconds);
  return push_to ? push_after_precompile(context, *push_to, code) : code;
}

} // namespace

std::vector<Command> precompile_commands() {
  return {{"precompile",
           "compile every variant a manifest, a log or the built-in defaults need (no GPU needed)",
           "precompile [--manifest FILE]... [--from-log FILE]... [--arch A]... [-j N] [--json]",
           "  --manifest FILE     variants or models to precompile (docs/manifest.md); "
           "repeatable;\n"
           "                      without --manifest and --from-log: the built-in defaults\n"
           "  --from-log FILE     replay the variants a run compiled or loaded (its events.jsonl)\n"
           "  --arch A            target architecture, e.g. sm_90a; repeatable (one pass each)\n"
           "  -j N                parallel compiles (default: number of cores)\n"
           "  --push              then store every entry of the root in the remote\n"
           "                      (SPECJIT_REMOTE, mode=rw; docs/fleet.md)\n",
           "specjit precompile --manifest deploy.json --arch sm_90a -j 8",
           {{"--manifest", true, true},
            {"--from-log", true, true},
            {"--arch", true, true},
            {"-j", true, false},
            {"--push", false, false}},
           0,
           0,
           run_precompile}};
}

} // namespace specjit::cli
