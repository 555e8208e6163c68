// specjit-bench capi: what the C ABI adds to a launch. The same tiny kernel (examples/c's,
// defined from a string) launched in bursts three ways, alternating: raw cuLaunchKernel of its
// CUfunction, specjit_kernel_launch (get + launch, a memory hit, a new num_tokens every call)
// and specjit_variant_launch (a variant the caller holds). Host µs per launch, medians over
// bursts short enough that the launch queue never fills (tools/bench/engine_bench.cpp's method);
// the three bursts of a round run in a rotating order, and "added" is the median over rounds
// of a burst's time minus the same round's raw burst.
#include "bench_common.h"
#include "launch_probe/scale_rows_kernel.h"

#include "specjit/specjit.h"

#include <cstdio>

namespace specjit::bench {

namespace {

using Clock = std::chrono::steady_clock;

void c_must(specjit_status status, const char* what) {
  if (status != SPECJIT_OK) {
    std::fprintf(stderr, "specjit-bench: %s: %s: %s\n", what, specjit_status_name(status),
                 specjit_last_error());
    std::exit(1);
  }
}

struct Figures {
  double raw_us = 0, kernel_launch_us = 0, variant_launch_us = 0;
  double kernel_added_us = 0, variant_added_us = 0; // medians of per-round differences
};

Figures launch_figures(specjit_kernel* kernel, CUfunction function, int launches) {
  const runtime::Driver& drv = *runtime::driver();
  CUdeviceptr x = 0, y = 0;
  must(drv.check(drv.cuMemAlloc(&x, 128 * sizeof(float)), "cuMemAlloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&y, 128 * sizeof(float)), "cuMemAlloc"), "alloc");
  int tokens = 1;
  float alpha = 2.0f;
  void* args[] = {&x, &y, &tokens, &alpha};
  const size_t sizes[] = {sizeof x, sizeof y, sizeof tokens, sizeof alpha};
  int64_t values[] = {1, 128};
  const specjit_variant* variant = nullptr;
  c_must(specjit_kernel_get(kernel, values, 2, &variant), "get");
  specjit_launch_config config = {sizeof config, {1, 1, 1}, {128, 1, 1}, 0, nullptr};
  const int burst = 200;
  std::vector<double> raw, through_kernel, through_variant;
  auto timed = [&](auto&& launch) {
    drv.cuCtxSynchronize();
    auto start = Clock::now();
    for (int i = 0; i < burst; ++i) {
      tokens = 1 + (i & 255); // a new num_tokens every call: the same (dynamic) variant
      launch();
    }
    return seconds_since(start) * 1e6 / burst;
  };
  std::vector<double> kernel_added, variant_added;
  auto raw_burst = [&] {
    return timed([&] {
      drv.cuLaunchKernel(function, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr);
    });
  };
  auto kernel_burst = [&] {
    return timed([&] {
      values[0] = tokens;
      if (specjit_kernel_launch(kernel, values, 2, &config, args, sizes, 4) != SPECJIT_OK)
        c_must(SPECJIT_ERROR_INTERNAL, "specjit_kernel_launch");
    });
  };
  auto variant_burst = [&] {
    return timed([&] {
      if (specjit_variant_launch(variant, &config, args, sizes, 4) != SPECJIT_OK)
        c_must(SPECJIT_ERROR_INTERNAL, "specjit_variant_launch");
    });
  };
  for (int round = 0; round < std::max(4, launches / burst) + 4; ++round) {
    // The three bursts in a rotating order, so that none always follows another.
    double r = 0, k = 0, v = 0;
    for (int turn = 0; turn < 3; ++turn)
      switch ((round + turn) % 3) {
      case 0: r = raw_burst(); break;
      case 1: k = kernel_burst(); break;
      default: v = variant_burst(); break;
      }
    if (round >= 4) { // warm-up rounds
      raw.push_back(r);
      through_kernel.push_back(k);
      through_variant.push_back(v);
      kernel_added.push_back(k - r); // paired: the same round's raw burst
      variant_added.push_back(v - r);
    }
  }
  drv.cuCtxSynchronize();
  drv.cuMemFree(x);
  drv.cuMemFree(y);
  return {median(raw), median(through_kernel), median(through_variant), median(kernel_added),
          median(variant_added)};
}

} // namespace

int run_capi_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--launches", "--json"}, {"--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    std::printf("specjit-bench capi [--launches 40000] [--json docs/bench/capi-launch-h200.json]\n");
    return 0;
  }
  int64_t launches = 0;
  if (!parse_count(flags, "capi", "--launches", 1000, 10'000'000, 40000, launches))
    return 2;
  if (!runtime::device_available()) {
    std::fprintf(stderr, "specjit-bench capi: no CUDA device: the benchmark times launches\n");
    return 1;
  }
  ScratchDir scratch("specjit-bench-capi");
  specjit_engine* engine = nullptr;
  specjit_kernel* kernel = nullptr;
  const char* step = nullptr;
  const specjit_status status = scale_rows_define(scratch.path().c_str(), &engine, &kernel, &step);
  c_must(status, step);

  // The raw launches' function: the same cubin, through the C++ engine on the same cache (a
  // disk hit), so both sides launch identical code in the device's primary context.
  runtime::Engine cxx(must(Config::from_environment(), "config"));
  runtime::KernelDef def;
  def.id = "scale_rows";
  def.source = runtime::KernelSource::from_text("scale_rows.cu", k_scale_rows_source);
  def.function = "scale_rows";
  def.params = {runtime::ParamDef::user("num_tokens", runtime::Policy::dynamic()),
                runtime::ParamDef::user("COLS", runtime::Policy::exact())};
  runtime::KernelId id = must(cxx.add_kernel(def), "add_kernel");
  const runtime::Variant* variant = must(cxx.get(id, {1, 128}), "get");

  Figures f = launch_figures(kernel, variant->function, static_cast<int>(launches));
  std::printf("%-44s %12s\n", "measure (host, per launch)", "us");
  std::printf("%-44s %12.3f\n", "raw cuLaunchKernel", f.raw_us);
  std::printf("%-44s %12.3f\n", "specjit_kernel_launch (get + launch)", f.kernel_launch_us);
  std::printf("%-44s %12.3f\n", "specjit_variant_launch", f.variant_launch_us);
  std::printf("%-44s %12.3f\n", "added by specjit_kernel_launch", f.kernel_added_us);
  std::printf("%-44s %12.3f\n", "added by specjit_variant_launch", f.variant_added_us);
  specjit_engine_destroy(engine);
  llvm::json::Object report{{"launches", launches},
                            {"raw_launch_us", f.raw_us},
                            {"kernel_launch_us", f.kernel_launch_us},
                            {"variant_launch_us", f.variant_launch_us},
                            {"kernel_launch_added_us", f.kernel_added_us},
                            {"variant_launch_added_us", f.variant_added_us},
                            {"goal_added_us", 0.1}};
  std::string json = flags.get("--json", "");
  if (!json.empty() && !write_report(json, std::move(report)))
    return 1;
  return 0;
}

} // namespace specjit::bench
