// specjit-bench engine: what the engine costs on top of the driver.
//  - lookup: prepare()/get() of a variant already in memory (the hot path), ns per call;
//  - launch: engine.get() + engine.launch() against a raw cuLaunchKernel of the same function,
//    batches of launches of a tiny kernel, µs per launch (GPU only);
//  - tensor map: cuTensorMapEncodeTiled of a MoE weight tensor, ns per map (GPU only);
//  - disk: a fresh process making N cached variants ready from disk, ms per variant
//    (prepare: read + verify; get: + module load, GPU only), against NVRTC compile ms.
#include "bench_common.h"

#include "jit/compiler.h"
#include "runtime/tensor_map.h"
#include "runtime/test_kernel.h"

#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace specjit::bench {

namespace {

using Clock = std::chrono::steady_clock;

Config bench_config(const std::string& cache_dir) {
  auto config = Config::from_environment();
  if (!config) {
    llvm::errs() << llvm::toString(config.takeError()) << "\n";
    std::exit(2);
  }
  config->cache_dir.set(cache_dir, SettingSource::cli_flag);
  config->log.set("off", SettingSource::cli_flag);
  return std::move(*config);
}

template <typename T> T check(llvm::Expected<T> value, const char* what) {
  if (!value) {
    llvm::errs() << "specjit-bench: " << what << ": " << llvm::toString(value.takeError()) << "\n";
    std::exit(1);
  }
  return std::move(*value);
}

void check(llvm::Error err, const char* what) {
  if (err) {
    llvm::errs() << "specjit-bench: " << what << ": " << llvm::toString(std::move(err)) << "\n";
    std::exit(1);
  }
}

// The child process: make N exact variants ready from a warm cache; print ms per variant.
int load_only(const std::string& cache_dir, int variants, bool gpu) {
  runtime::Engine engine(bench_config(cache_dir));
  runtime::KernelId kernel =
      check(engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::exact())), "add");
  // Once-per-process costs are timed apart from the per-variant cost: loading NVRTC (its
  // version is part of every key), initializing the driver to learn the device's architecture
  // (cuInit) and, when loading modules, creating the device's primary context.
  auto setup_start = Clock::now();
  (void)jit::nvrtc_version();
  (void)engine.arch();
  if (gpu)
    check(engine.make_context_current(), "context");
  double setup_ms = seconds_since(setup_start) * 1e3;
  std::vector<double> each;
  auto start = Clock::now();
  for (int i = 1; i <= variants; ++i) {
    auto one = Clock::now();
    if (gpu)
      check(engine.get(kernel, {128, i}), "get");
    else
      check(engine.prepare(kernel, {128, i}), "prepare");
    each.push_back(seconds_since(one) * 1e3);
  }
  double ms = seconds_since(start) * 1e3 / variants;
  runtime::EngineStats stats = engine.stats();
  std::printf("{\"ms_per_variant\": %.6f, \"median_ms\": %.6f, \"first_ms\": %.6f, "
              "\"setup_ms\": %.3f, \"disk_hits\": %llu, \"compiles\": %llu}\n",
              ms, median(each), each.front(), setup_ms,
              static_cast<unsigned long long>(stats.disk_hits),
              static_cast<unsigned long long>(stats.compiles));
  return 0;
}

llvm::json::Object run_child(const std::string& self, const std::string& cache_dir, int variants,
                             bool gpu) {
  std::string command = fmt::format("'{}' engine --load-only --cache-dir '{}' --variants {}{}",
                                    self, cache_dir, variants, gpu ? " --gpu" : "");
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[512];
  while (pipe && fgets(buffer, sizeof buffer, pipe))
    output += buffer;
  if (!pipe || pclose(pipe) != 0) {
    llvm::errs() << "specjit-bench: the load-only child failed\n";
    std::exit(1);
  }
  return std::move(*check(llvm::json::parse(output), "child output").getAsObject());
}

double lookup_ns(runtime::Engine& engine, runtime::KernelId kernel, bool load, int count) {
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    auto variant = load ? engine.get(kernel, {128, i & 1023}) : engine.prepare(kernel, {128, i & 1023});
    if (!variant) {
      llvm::consumeError(variant.takeError());
      std::exit(1);
    }
  }
  return seconds_since(start) * 1e9 / count;
}

// ns per TMA tensor map encoded by the driver (a MoE weight tensor's shape; fused_moe encodes
// one for each of its GEMMs' weights and token rows at every call).
double tensor_map_ns(int count) {
  constexpr CUdeviceptr k_base = 0x7f0000000000ull; // encoding reads no memory
  auto start = Clock::now();
  for (int i = 0; i < count; ++i)
    check(runtime::tensor_map_u8_3d(k_base + (i & 3) * (uint64_t{1} << 32), {2048, 1536, 128},
                                    {128, 64, 1}),
          "tensor map");
  return seconds_since(start) * 1e9 / count;
}

struct LaunchFigures {
  double raw_us = 0;
  double engine_us = 0;
};

LaunchFigures launch_figures(runtime::Engine& engine, runtime::KernelId kernel, int launches) {
  const runtime::Driver& drv = *runtime::driver();
  check(engine.make_context_current(), "context");
  CUdeviceptr x = 0, y = 0;
  check(drv.check(drv.cuMemAlloc(&x, 128 * sizeof(float)), "cuMemAlloc"), "alloc");
  check(drv.check(drv.cuMemAlloc(&y, 128 * sizeof(float)), "cuMemAlloc"), "alloc");
  check(drv.check(drv.cuMemsetD32(x, 0x3f800000, 128), "cuMemsetD32"), "memset");
  const runtime::Variant* variant = check(engine.get(kernel, {128, 1}), "get");
  int tokens = 1;
  float alpha = 2.0f;
  void* args[] = {&x, &y, &tokens, &alpha};
  runtime::LaunchConfig config{{1, 1, 1}, {128, 1, 1}, 0, nullptr};
  // Host-side cost of submitting a launch: a burst short enough that the launch queue never
  // fills (so the GPU's execution time is not what is timed), then a synchronize outside the
  // timed region. Raw and engine bursts alternate; medians over many bursts.
  const int burst = 200;
  std::vector<double> raw, through_engine;
  for (int round = 0; round < std::max(4, launches / burst) + 4; ++round) {
    drv.cuCtxSynchronize();
    auto start = Clock::now();
    for (int i = 0; i < burst; ++i) {
      tokens = 1 + (i & 255);
      drv.cuLaunchKernel(variant->function, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr);
    }
    double raw_us = seconds_since(start) * 1e6 / burst;
    drv.cuCtxSynchronize();
    start = Clock::now();
    for (int i = 0; i < burst; ++i) {
      tokens = 1 + (i & 255); // a new num_tokens every call: still the same (dynamic) variant
      auto v = engine.get(kernel, {128, tokens});
      if (!v || engine.launch(**v, config, x, y, tokens, alpha)) {
        llvm::errs() << "specjit-bench: launch through the engine failed\n";
        std::exit(1);
      }
    }
    double engine_us = seconds_since(start) * 1e6 / burst;
    if (round >= 4) { // warm-up bursts
      raw.push_back(raw_us);
      through_engine.push_back(engine_us);
    }
  }
  drv.cuCtxSynchronize();
  drv.cuMemFree(x);
  drv.cuMemFree(y);
  return {median(raw), median(through_engine)};
}

} // namespace

int run_engine_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--variants", "--launches", "--lookups", "--json", "--cache-dir"},
                   {"--load-only", "--gpu", "--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << "specjit-bench engine [--variants 64] [--launches 20000] [--lookups 2000000]\n"
                    "                     [--json docs/bench/engine.json] [--cache-dir DIR]\n";
    return 0;
  }
  int variants = std::atoi(flags.get("--variants", "64").c_str());
  std::string cache_dir = flags.get("--cache-dir", "");
  if (flags.has("--load-only"))
    return load_only(cache_dir, variants, flags.has("--gpu"));
  std::optional<ScratchDir> scratch;
  if (cache_dir.empty()) {
    scratch.emplace("specjit-bench");
    cache_dir = scratch->path();
  }
  bool gpu = runtime::device_available();
  runtime::Engine engine(bench_config(cache_dir));
  runtime::KernelId exact =
      check(engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::exact())), "add");
  runtime::KernelId dynamic =
      check(engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::dynamic())), "add");

  auto start = Clock::now();
  for (int i = 1; i <= variants; ++i)
    check(engine.prepare(exact, {128, i}), "compile");
  double compile_ms = seconds_since(start) * 1e3 / variants;
  check(engine.prepare(dynamic, {128, 1}), "compile");

  int lookups = std::atoi(flags.get("--lookups", "2000000").c_str());
  double prepare_ns = lookup_ns(engine, dynamic, false, lookups);
  llvm::json::Object report{{"variants", variants},
                            {"compile_ms_per_variant", compile_ms},
                            {"prepare_hit_ns", prepare_ns}};
  std::string self = argv[0];
  llvm::json::Object disk = run_child(self, cache_dir, variants, false);
  report["disk_prepare_ms_per_variant"] = *disk.getNumber("ms_per_variant");
  report["disk_prepare_median_ms"] = *disk.getNumber("median_ms");
  report["disk_prepare_first_ms"] = *disk.getNumber("first_ms");
  report["process_setup_ms"] = *disk.getNumber("setup_ms");

  std::printf("%-44s %12s\n", "measure", "value");
  std::printf("%-44s %12.2f\n", "NVRTC compile, ms per variant", compile_ms);
  std::printf("%-44s %12.1f\n", "memory hit, prepare(), ns", prepare_ns);
  std::printf("%-44s %12.4f\n", "fresh process, disk -> ready, ms per variant",
              *disk.getNumber("ms_per_variant"));
  std::printf("%-44s %12.2f\n", "  (once per process: NVRTC, cuInit, ms)",
              *disk.getNumber("setup_ms"));
  if (gpu) {
    double get_ns = lookup_ns(engine, dynamic, true, lookups);
    llvm::json::Object loaded = run_child(self, cache_dir, variants, true);
    LaunchFigures launch =
        launch_figures(engine, dynamic, std::atoi(flags.get("--launches", "20000").c_str()));
    report["get_hit_ns"] = get_ns;
    report["disk_get_ms_per_variant"] = *loaded.getNumber("ms_per_variant");
    report["disk_get_median_ms"] = *loaded.getNumber("median_ms");
    report["process_setup_with_context_ms"] = *loaded.getNumber("setup_ms");
    report["raw_launch_us"] = launch.raw_us;
    report["engine_launch_us"] = launch.engine_us;
    report["added_per_launch_us"] = launch.engine_us - launch.raw_us;
    report["tensor_map_encode_ns"] = tensor_map_ns(20000);
    std::printf("%-44s %12.1f\n", "memory hit, get() (loaded), ns", get_ns);
    std::printf("%-44s %12.4f\n", "fresh process, disk -> loaded, ms per variant",
                *loaded.getNumber("ms_per_variant"));
    std::printf("%-44s %12.2f\n", "  (once per process: + context, ms)",
                *loaded.getNumber("setup_ms"));
    std::printf("%-44s %12.3f\n", "raw cuLaunchKernel, us per launch", launch.raw_us);
    std::printf("%-44s %12.3f\n", "engine get()+launch(), us per launch", launch.engine_us);
    std::printf("%-44s %12.3f\n", "added per launch, us", launch.engine_us - launch.raw_us);
    std::printf("%-44s %12.1f\n", "TMA tensor map encode, ns",
                *report.getNumber("tensor_map_encode_ns"));
  } else {
    std::printf("(no GPU: launch and module-load figures skipped)\n");
  }
  std::string json = flags.get("--json", "");
  if (!json.empty() && !write_report(json, std::move(report)))
    return 1;
  return 0;
}

} // namespace specjit::bench
