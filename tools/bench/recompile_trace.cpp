// specjit-bench recompile-trace: replays a serving trace of token counts through
// inv_rope_fp8_quant under three policies for num_tokens, each on a fresh cache:
//   exact    every distinct token count is its own variant (what baking T in costs),
//   triton   divisibility by 16 plus a value-1 variant (Triton's default specialization),
//   dynamic  num_tokens is a run-time argument (specjit's default).
// Reports requests, distinct token counts, compiles, seconds compiling on the request path,
// the trace's wall time (GPU), and the compiles of a warm replay in a new process (must be 0).
#include "bench_common.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <unistd.h>

namespace specjit::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> default_trace(int requests, uint64_t seed) {
  // Chat-like prompt lengths: log-normal around a few hundred tokens, capped at 8192.
  std::mt19937_64 generator(seed);
  std::lognormal_distribution<double> lengths(std::log(384.0), 1.1);
  std::vector<int64_t> trace;
  for (int i = 0; i < requests; ++i)
    trace.push_back(std::clamp<int64_t>(static_cast<int64_t>(lengths(generator)), 1, 8192));
  return trace;
}

bool read_trace(const std::string& path, std::vector<int64_t>& trace) {
  std::ifstream in(path);
  if (!in) {
    llvm::errs() << "specjit-bench: cannot read trace " << path << "\n";
    return false;
  }
  int64_t value = 0;
  while (in >> value) {
    if (value < 1 || value > 1'000'000) {
      llvm::errs() << "specjit-bench: " << path << ": token count " << value
                   << " out of range [1, 1000000]\n";
      return false;
    }
    trace.push_back(value);
  }
  if (trace.empty())
    llvm::errs() << "specjit-bench: " << path << " holds no token counts\n";
  return !trace.empty();
}

// Device buffers sized for the largest request; each request views a prefix.
struct Buffers {
  CUdeviceptr o = 0, positions = 0, cos_sin = 0, out = 0, scales = 0;
  int64_t max_tokens = 0, heads = 0, max_pos = 8192;
};

bool allocate(const Buffers& want, Buffers& b) {
  const runtime::Driver& drv = *runtime::driver();
  b = want;
  int64_t ta = (b.max_tokens + 3) / 4 * 4;
  bool ok = drv.cuMemAlloc(&b.o, b.max_tokens * b.heads * 512 * 2) == CUDA_SUCCESS &&
            drv.cuMemAlloc(&b.positions, b.max_tokens * 8) == CUDA_SUCCESS &&
            drv.cuMemAlloc(&b.cos_sin, b.max_pos * 64 * 4) == CUDA_SUCCESS &&
            drv.cuMemAlloc(&b.out, b.max_tokens * b.heads * 512) == CUDA_SUCCESS &&
            drv.cuMemAlloc(&b.scales, b.heads * 4 * ta * 4) == CUDA_SUCCESS;
  // Non-zero inputs (bf16 1.0 pairs, cos/sin 0.5); positions 0..: all in range.
  ok = ok && drv.cuMemsetD32(b.o, 0x3f803f80, b.max_tokens * b.heads * 256) == CUDA_SUCCESS &&
       drv.cuMemsetD32(b.cos_sin, 0x3f000000, b.max_pos * 64) == CUDA_SUCCESS &&
       drv.cuMemsetD8(b.positions, 0, b.max_tokens * 8) == CUDA_SUCCESS;
  return ok;
}

llvm::Error run_op(runtime::Engine& engine, const Buffers& b, int64_t tokens,
                   const ops::InvRopeFp8QuantOptions& options) {
  using runtime::DType;
  int64_t g = options.num_groups, hpg = options.heads_per_group, ta = (tokens + 3) / 4 * 4;
  runtime::TensorRef o{b.o, DType::bf16, {tokens, g * hpg, 512}, {}};
  runtime::TensorRef positions{b.positions, DType::i64, {tokens}, {}};
  runtime::TensorRef cos_sin{b.cos_sin, DType::f32, {b.max_pos, 64}, {}};
  runtime::TensorRef out{b.out, DType::e4m3, {g, tokens, hpg * 512}, {}};
  runtime::TensorRef scales{b.scales, DType::f32, {g, hpg * 4, ta}, {}};
  return ops::inv_rope_fp8_quant(engine, o, positions, cos_sin, out, scales, options, nullptr);
}

struct PolicyResult {
  std::string policy;
  uint64_t compiles = 0;
  double compile_seconds = 0;
  std::optional<double> wall_seconds;
};

// Replays the trace on one engine. With buffers, each request runs the op on the GPU.
llvm::Expected<PolicyResult> replay(const std::string& policy_name, const std::string& cache_dir,
                                    const std::vector<int64_t>& trace, const Buffers* buffers,
                                    const ops::InvRopeFp8QuantOptions& base) {
  auto config = Config::from_environment();
  if (!config)
    return config.takeError();
  config->cache_dir.set(cache_dir, SettingSource::cli_flag);
  config->log.set(cache_dir + "/events.jsonl", SettingSource::cli_flag);
  auto policy = runtime::Policy::parse(policy_name);
  if (!policy)
    return policy.takeError();
  ops::InvRopeFp8QuantOptions options = base;
  options.num_tokens_policy = *policy;
  runtime::Engine engine(*config);
  PolicyResult result{policy_name, 0, 0, std::nullopt};
  const runtime::Driver* drv = buffers ? &*runtime::driver() : nullptr;
  auto trace_start = Clock::now();
  for (int64_t tokens : trace) {
    uint64_t before = engine.stats().compiles;
    auto start = Clock::now();
    if (buffers) {
      if (auto err = run_op(engine, *buffers, tokens, options))
        return err;
      drv->cuCtxSynchronize(); // a request completes before the next arrives
    } else if (auto variant = ops::prepare_inv_rope_fp8_quant(engine, tokens, options); !variant) {
      return variant.takeError();
    }
    if (engine.stats().compiles != before)
      result.compile_seconds += seconds_since(start);
  }
  if (buffers)
    result.wall_seconds = seconds_since(trace_start);
  result.compiles = engine.stats().compiles;
  return result;
}

} // namespace

int run_recompile_trace(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2,
                   {"--trace", "--requests", "--seed", "--out", "--groups", "--heads-per-group",
                    "--replay-policy", "--cache-dir"},
                   {"--compile-only", "--json", "--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << "specjit-bench recompile-trace [--trace FILE | --requests 200 --seed 42]\n"
                    "    [--compile-only] [--json] [--out docs/bench/FILE.json]\n"
                    "    [--groups 8 --heads-per-group 16]\n"
                    "example: specjit-bench recompile-trace --compile-only --json\n";
    return 0;
  }
  std::vector<int64_t> trace;
  if (flags.get("--trace", "").empty())
    trace = default_trace(std::atoi(flags.get("--requests", "200").c_str()),
                          std::strtoull(flags.get("--seed", "42").c_str(), nullptr, 10));
  else if (!read_trace(flags.get("--trace", ""), trace))
    return 2;
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = std::atoll(flags.get("--groups", "8").c_str());
  options.heads_per_group = std::atoll(flags.get("--heads-per-group", "16").c_str());
  bool gpu = !flags.has("--compile-only") && runtime::device_available();

  // The warm replay runs in this same program, started again as a new process.
  if (std::string policy = flags.get("--replay-policy", ""); !policy.empty()) {
    auto result = replay(policy, flags.get("--cache-dir", ""), trace, nullptr, options);
    if (!result) {
      llvm::errs() << llvm::toString(result.takeError()) << "\n";
      return 1;
    }
    std::printf("%llu\n", static_cast<unsigned long long>(result->compiles));
    return 0;
  }

  Buffers buffers;
  // Holds the device's primary context (and so the buffers) for the whole run.
  std::unique_ptr<runtime::Engine> context_holder;
  if (gpu) {
    context_holder = std::make_unique<runtime::Engine>(*Config::from_environment());
    if (auto err = context_holder->make_context_current()) {
      llvm::errs() << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
    Buffers want;
    want.max_tokens = *std::max_element(trace.begin(), trace.end());
    want.heads = options.num_groups * options.heads_per_group;
    if (!allocate(want, buffers)) {
      llvm::errs() << "specjit-bench: device allocation failed\n";
      return 1;
    }
  }

  std::set<int64_t> distinct(trace.begin(), trace.end());
  ScratchDir scratch("specjit-trace");
  std::string trace_path = scratch.path() + "/trace.txt";
  {
    std::ofstream out(trace_path);
    for (int64_t t : trace)
      out << t << "\n";
  }

  llvm::json::Array policies;
  // With --json, stdout carries the JSON object alone; the table goes to stderr.
  FILE* table = flags.has("--json") ? stderr : stdout;
  std::fprintf(table, "%-8s %9s %9s %9s %10s %12s %10s\n", "policy", "requests", "distinct", "compiles",
              "compile_s", "warm_compiles", "wall_s");
  for (const char* policy : {"exact", "triton", "dynamic"}) {
    std::string cache_dir = scratch.path() + "/" + policy; // a fresh cache per policy
    auto result = replay(policy, cache_dir, trace, gpu ? &buffers : nullptr, options);
    if (!result) {
      llvm::errs() << "specjit-bench: policy " << policy << ": "
                   << llvm::toString(result.takeError()) << "\n";
      return 1;
    }
    std::string command = fmt::format(
        "'{}' recompile-trace --trace '{}' --replay-policy {} --cache-dir '{}' --groups {} "
        "--heads-per-group {}",
        argv[0], trace_path, policy, cache_dir, options.num_groups, options.heads_per_group);
    FILE* pipe = popen(command.c_str(), "r");
    unsigned long long warm = ~0ull;
    if (pipe == nullptr || std::fscanf(pipe, "%llu", &warm) != 1 || pclose(pipe) != 0) {
      llvm::errs() << "specjit-bench: the warm replay of " << policy << " failed\n";
      return 1;
    }
    std::fprintf(table, "%-8s %9zu %9zu %9llu %10.2f %12llu %10s\n", policy, trace.size(), distinct.size(),
                static_cast<unsigned long long>(result->compiles), result->compile_seconds, warm,
                result->wall_seconds ? fmt::format("{:.3f}", *result->wall_seconds).c_str() : "-");
    policies.push_back(llvm::json::Object{
        {"policy", policy},
        {"requests", static_cast<int64_t>(trace.size())},
        {"distinct_tokens", static_cast<int64_t>(distinct.size())},
        {"compiles", static_cast<int64_t>(result->compiles)},
        {"compile_seconds", result->compile_seconds},
        {"warm_replay_compiles", static_cast<int64_t>(warm)},
        {"wall_seconds",
         result->wall_seconds ? llvm::json::Value(*result->wall_seconds) : llvm::json::Value(nullptr)}});
  }
  llvm::json::Object report{{"policies", std::move(policies)}};
  if (flags.has("--json"))
    llvm::outs() << llvm::json::Value(llvm::json::Object(report)) << "\n";
  if (std::string path = flags.get("--out", ""); !path.empty())
    return write_report(path, std::move(report)) ? 0 : 1;
  return 0;
}

} // namespace specjit::bench
