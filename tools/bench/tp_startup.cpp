// specjit-bench tp-startup: starts the ranks (fork + exec of this binary in its per-rank mode),
// releases them at one instant, then their ready phases once all are set up, collects their
// results, runs again on the same root (warm), and reports. See docs/bench/tp-startup.md.
#include "tp_startup.h"
#include "tp_startup_data.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

namespace specjit::bench {

namespace {

constexpr const char* k_usage =
    "specjit-bench tp-startup [--ranks 8] [--gpus G] [--cache-dir DIR] [--prepare-only]\n"
    "    [--kernels inv_rope,moe] [--tokens 1,4,16,64,256,1024] [--trace-steps 200]\n"
    "    [--max-tokens 2048] [--seed 1] [--json FILE]\n"
    "  N ranks start at once on one cache root (default: a fresh temporary one), rank r on\n"
    "  device r % G (G: every visible device); each makes the warm-up's variants ready, launches\n"
    "  them, then serves a trace of token counts; then all again on the same root (warm).\n"
    "  --prepare-only: no GPU; the ranks compile or read the same variants without launching.\n";

struct Parent {
  std::string exe;
  TpPlan plan;
  int64_t ranks = 8;
  int64_t gpus = 1;
  std::string root;
  std::string data_root; // the device data kernel's cache (device_random.h)
  std::string results;
};

// The parent's pipes to its ranks: two releases (the start, then the ready phase) and the
// ranks' "set up" bytes. A rank holds only the read ends of the releases and the write end of
// the other: otherwise its own copy would keep a release open for ever.
struct RankPipes {
  int release[2] = {-1, -1};
  int ready_release[2] = {-1, -1};
  int setup_done[2] = {-1, -1};
};

void child_exec(const std::vector<std::string>& args, const RankPipes& pipes) {
  for (int fd : {pipes.release[1], pipes.ready_release[1], pipes.setup_done[0]})
    close(fd);
  std::vector<char*> argv;
  for (const std::string& arg : args)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  std::perror("specjit-bench tp-startup: exec");
  _exit(127);
}

std::vector<std::string> rank_args(const Parent& p, const std::string& phase, int64_t rank,
                                   const RankPipes& pipes) {
  std::vector<std::string> args = {p.exe,
                                   "tp-startup",
                                   "--rank",
                                   std::to_string(rank),
                                   "--device",
                                   std::to_string(rank % p.gpus),
                                   "--release-fd",
                                   std::to_string(pipes.release[0]),
                                   "--setup-done-fd",
                                   std::to_string(pipes.setup_done[1]),
                                   "--ready-release-fd",
                                   std::to_string(pipes.ready_release[0]),
                                   "--cache-dir",
                                   p.root,
                                   "--data-cache-dir",
                                   p.data_root,
                                   "--result",
                                   p.results + "/" + phase + "-" + std::to_string(rank) + ".json"};
  for (std::string& arg : p.plan.to_args())
    args.push_back(std::move(arg));
  return args;
}

std::optional<llvm::json::Object> read_result(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return std::nullopt;
  auto value = llvm::json::parse((*buffer)->getBuffer());
  if (!value || !value->getAsObject()) {
    llvm::consumeError(value.takeError());
    return std::nullopt;
  }
  return std::move(*value->getAsObject());
}

// Starts every rank blocked on the release pipe, releases them, waits for all. False (with a
// message per failed rank) when any rank did not finish with a result.
// Reads one byte per rank from the ranks' "set up" pipe; returns early when every write end is
// closed (a rank that died before its set-up was done: waitpid reports it).
void wait_for_setups(int fd, int64_t ranks) {
  char bytes[64];
  for (int64_t done = 0; done < ranks;) {
    const ssize_t got = read(fd, bytes, sizeof bytes);
    if (got == 0 || (got < 0 && errno != EINTR))
      return;
    done += std::max<ssize_t>(got, 0);
  }
}

bool run_ranks(const Parent& p, const std::string& phase, std::vector<llvm::json::Object>& out,
               double& wall_ms) {
  RankPipes pipes;
  if (pipe(pipes.release) != 0 || pipe(pipes.ready_release) != 0 || pipe(pipes.setup_done) != 0) {
    std::perror("specjit-bench tp-startup: pipe");
    return false;
  }
  std::fflush(nullptr);
  llvm::outs().flush();
  std::vector<pid_t> pids;
  for (int64_t rank = 0; rank < p.ranks; ++rank) {
    const std::vector<std::string> args = rank_args(p, phase, rank, pipes);
    const pid_t pid = fork();
    if (pid == 0)
      child_exec(args, pipes);
    if (pid < 0) {
      std::perror("specjit-bench tp-startup: fork");
      break;
    }
    pids.push_back(pid);
  }
  for (int fd : {pipes.release[0], pipes.ready_release[0], pipes.setup_done[1]})
    close(fd);
  const auto start = std::chrono::steady_clock::now();
  close(pipes.release[1]); // the release: every rank's read returns now
  wait_for_setups(pipes.setup_done[0], static_cast<int64_t>(pids.size()));
  close(pipes.setup_done[0]);
  close(pipes.ready_release[1]); // the second release: every rank's ready phase starts now
  bool ok = static_cast<int64_t>(pids.size()) == p.ranks;
  for (size_t rank = 0; rank < pids.size(); ++rank) {
    int status = 0;
    while (waitpid(pids[rank], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      llvm::errs() << "specjit-bench tp-startup: " << phase << " rank " << rank << " failed ("
                   << (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                         : "signal " + std::to_string(WTERMSIG(status)))
                   << ")\n";
      ok = false;
    }
  }
  wall_ms = seconds_since(start) * 1000.0;
  for (int64_t rank = 0; ok && rank < p.ranks; ++rank) {
    auto result = read_result(p.results + "/" + phase + "-" + std::to_string(rank) + ".json");
    if (!result) {
      llvm::errs() << "specjit-bench tp-startup: " << phase << " rank " << rank
                   << " wrote no readable result\n";
      return false;
    }
    out.push_back(std::move(*result));
  }
  return ok;
}

// The per-rank mode: the hidden flags the parent passes.
int rank_main(const Flags& flags, const TpPlan& plan) {
  RankArgs args;
  int64_t fd = -1, setup_done_fd = -1, ready_release_fd = -1;
  if (!parse_count(flags, "tp-startup", "--rank", 0, 1023, 0, args.rank) ||
      !parse_count(flags, "tp-startup", "--device", 0, 1023, 0, args.device) ||
      !parse_count(flags, "tp-startup", "--release-fd", 0, 65535, -1, fd) ||
      !parse_count(flags, "tp-startup", "--setup-done-fd", 0, 65535, -1, setup_done_fd) ||
      !parse_count(flags, "tp-startup", "--ready-release-fd", 0, 65535, -1, ready_release_fd))
    return 2;
  args.release_fd = static_cast<int>(fd);
  args.setup_done_fd = static_cast<int>(setup_done_fd);
  args.ready_release_fd = static_cast<int>(ready_release_fd);
  args.data_cache_dir = flags.get("--data-cache-dir", "");
  args.cache_dir = flags.get("--cache-dir", "");
  args.result_path = flags.get("--result", "");
  if (args.cache_dir.empty() || args.result_path.empty()) {
    llvm::errs() << "specjit-bench tp-startup: a rank needs --cache-dir and --result\n";
    return 2;
  }
  return run_tp_rank(plan, args);
}

// Compiles the device data kernel (device_random.h) into its own root once, so that the ranks'
// set-up only loads it.
void prepare_device_data(const std::string& root) {
  runtime::Engine engine(device_random_config(must(Config::from_environment(), "config"), root));
  for (const runtime::VariantRequest& request : device_random_variants())
    must(engine.prepare(must(engine.add_kernel(request.def), "kernel"), request.values),
         "device data kernel");
}

// The number of GPUs the ranks are spread over: --gpus (at most the visible ones), else all.
bool pick_gpus(const Flags& flags, bool prepare_only, int64_t& gpus) {
  if (prepare_only)
    return parse_count(flags, "tp-startup", "--gpus", 1, 1024, 1, gpus);
  int visible = 0;
  if (!runtime::device_available() ||
      must(runtime::driver(), "driver").cuDeviceGetCount(&visible) != CUDA_SUCCESS || visible < 1) {
    llvm::errs() << "specjit-bench tp-startup: needs a CUDA device (--prepare-only runs "
                    "without one)\n";
    return false;
  }
  return parse_count(flags, "tp-startup", "--gpus", 1, visible, visible, gpus);
}

} // namespace

int run_tp_startup(int argc, char** argv) {
  std::vector<std::string> with_value = k_tp_plan_value_flags;
  with_value.insert(with_value.end(), {"--ranks", "--gpus", "--cache-dir", "--json", "--rank",
                                       "--device", "--release-fd", "--setup-done-fd",
                                       "--ready-release-fd", "--data-cache-dir", "--result"});
  Flags flags;
  if (!parse_flags(argc, argv, 2, with_value, {"--prepare-only", "--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << k_usage;
    return 0;
  }
  Parent p;
  if (!parse_plan(flags, p.plan))
    return 2;
  if (!flags.get("--rank", "").empty())
    return rank_main(flags, p.plan);
  if (!parse_count(flags, "tp-startup", "--ranks", 1, 256, 8, p.ranks) ||
      !pick_gpus(flags, p.plan.prepare_only, p.gpus))
    return 2;
  p.exe = llvm::sys::fs::getMainExecutable(argv[0], reinterpret_cast<void*>(&run_tp_startup));
  std::optional<ScratchDir> scratch_root;
  p.root = flags.get("--cache-dir", "");
  if (p.root.empty())
    p.root = scratch_root.emplace("specjit-tp-startup").path();
  ScratchDir results("specjit-tp-startup-results");
  p.results = results.path();
  p.data_root = p.results + "/device-data-cache";
  if (!p.plan.prepare_only)
    prepare_device_data(p.data_root);
  const bool root_was_empty = !llvm::sys::fs::exists(p.root + "/entries");

  std::printf("tp-startup: %lld ranks on %lld GPU(s)%s, cache root %s\n",
              static_cast<long long>(p.ranks), static_cast<long long>(p.gpus),
              p.plan.prepare_only ? " (prepare-only: no launches)" : "", p.root.c_str());
  llvm::json::Array runs;
  bool pass = true;
  for (const char* phase : {"cold", "warm"}) {
    std::vector<llvm::json::Object> ranks;
    double wall_ms = 0;
    if (!run_ranks(p, phase, ranks, wall_ms))
      return 1;
    llvm::json::Object run = analyse_tp_run(phase, std::move(ranks), p.root + "/logs/events.jsonl");
    run["wall_ms"] = wall_ms;
    print_tp_run(run);
    pass = pass && *run.getBoolean("pass");
    runs.push_back(std::move(run));
  }
  std::printf("acceptance (cold: each key compiled once, waits within the slowest compile + 10 %%; "
              "warm: no compile, ready < 50 ms): %s\n",
              pass ? "PASS" : "FAIL");
  std::fflush(stdout); // before write_report's line on llvm::outs
  const std::string json = flags.get("--json", "");
  if (json.empty())
    return 0;
  llvm::json::Array args;
  for (const std::string& arg : p.plan.to_args())
    args.push_back(arg);
  return write_report(
             json,
             llvm::json::Object{{"benchmark", "tp-startup"},
                                {"moe_shape", "deepseek-v3-tp8: E=256, top-8, H=7168, I=256, fp8"},
                                {"inv_rope_shape", "8 groups x 16 heads, max_pos 8192"},
                                {"ranks", p.ranks},
                                {"gpus", p.gpus},
                                {"prepare_only", p.plan.prepare_only},
                                {"data", p.plan.prepare_only ? "none (no launches)" : k_tp_data},
                                {"plan", std::move(args)},
                                {"root_was_empty", root_was_empty},
                                {"trace_steps", p.plan.trace_steps},
                                {"pass", pass},
                                {"runs", std::move(runs)}})
             ? 0
             : 1;
}

} // namespace specjit::bench
