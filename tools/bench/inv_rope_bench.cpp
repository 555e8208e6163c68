// specjit-bench inv-rope: times inv_rope_fp8_quant over token counts with device events
// (graph replay of many launches for small T, where launch cost would dominate) and reports
// µs and effective TB/s (bytes read + written), next to KERNELS.md's targets.
#include "bench_common.h"

#include "runtime/ops/inv_rope_fp8_quant.h"

#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <random>

namespace specjit::bench {

namespace {

struct Problem {
  int64_t tokens, groups, heads_per_group, max_pos = 8192;
  int64_t heads() const { return groups * heads_per_group; }
  int64_t padded() const { return (tokens + 3) / 4 * 4; }
  double bytes() const {
    // Read o, positions and one 256-byte cos/sin row per token; write fp8 and scales.
    return static_cast<double>(tokens) * heads() * 512 * 2 + tokens * 8.0 + tokens * 256.0 +
           static_cast<double>(tokens) * heads() * 512 + groups * heads_per_group * 4.0 * padded() * 4;
  }
};

struct Device {
  const runtime::Driver& drv;
  CUdeviceptr o = 0, positions = 0, cos_sin = 0, out = 0, scales = 0;
};

void fill_random(const runtime::Driver& drv, CUdeviceptr ptr, size_t bytes, uint32_t seed,
                 uint32_t mask, uint32_t bias) {
  std::vector<uint32_t> host(bytes / 4);
  std::mt19937 generator(seed);
  for (uint32_t& word : host)
    word = (generator() & mask) | bias;
  must(drv.check(drv.cuMemcpyHtoD(ptr, host.data(), bytes), "cuMemcpyHtoD"), "upload");
}

llvm::Error launch(runtime::Engine& engine, const Device& d, const Problem& p, CUstream stream) {
  using runtime::DType;
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = p.groups;
  options.heads_per_group = p.heads_per_group;
  runtime::TensorRef o{d.o, DType::bf16, {p.tokens, p.heads(), 512}, {}};
  runtime::TensorRef positions{d.positions, DType::i64, {p.tokens}, {}};
  runtime::TensorRef cos_sin{d.cos_sin, DType::f32, {p.max_pos, 64}, {}};
  runtime::TensorRef out{d.out, DType::e4m3, {p.groups, p.tokens, p.heads_per_group * 512}, {}};
  runtime::TensorRef scales{d.scales, DType::f32, {p.groups, p.heads_per_group * 4, p.padded()}, {}};
  return ops::inv_rope_fp8_quant(engine, o, positions, cos_sin, out, scales, options, stream);
}

// Median µs per launch, from graph replays (the host's launch path stays out of the kernel's
// time): 100 launches per graph for small T, 10 for large T.
double time_us(runtime::Engine& engine, const Device& d, const Problem& p, CUstream stream) {
  const runtime::Driver& drv = d.drv;
  const int per_graph = p.tokens <= 512 ? 100 : 10;
  CUgraphExec exec = nullptr;
  if (per_graph > 1) {
    must(drv.check(drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture"),
         "capture");
    for (int i = 0; i < per_graph; ++i)
      must(launch(engine, d, p, stream), "launch");
    CUgraph graph = nullptr;
    must(drv.check(drv.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture"), "capture");
    must(drv.check(drv.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate"), "graph");
    drv.cuGraphDestroy(graph);
  }
  StreamTimer timer(drv, stream);
  std::vector<double> samples;
  for (int rep = 0; rep < 25; ++rep) {
    const float ms = timer.ms("replay", [&] {
      if (exec)
        must(drv.check(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch"), "graph launch");
      else
        must(launch(engine, d, p, stream), "launch");
    });
    if (rep >= 5) // warm-up
      samples.push_back(ms * 1e3 / per_graph);
  }
  if (exec)
    drv.cuGraphExecDestroy(exec);
  return median(samples);
}

} // namespace

int run_inv_rope_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--groups", "--heads-per-group", "--json"}, {"--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << "specjit-bench inv-rope [--groups 8] [--heads-per-group 16] "
                    "[--json docs/bench/inv-rope.json]\n";
    return 0;
  }
  if (!runtime::device_available()) {
    llvm::errs() << "specjit-bench inv-rope: needs a CUDA device\n";
    return 1;
  }
  auto config = must(Config::from_environment(), "config");
  runtime::Engine engine(config);
  must(engine.make_context_current(), "context");
  const runtime::Driver& drv = *runtime::driver();
  int64_t groups = std::atoll(flags.get("--groups", "8").c_str());
  int64_t hpg = std::atoll(flags.get("--heads-per-group", "16").c_str());
  const std::vector<int64_t> token_counts = {1, 2, 4, 16, 64, 128, 512, 1024, 2048, 4096, 8192};
  Problem largest{token_counts.back(), groups, hpg};
  Device d{drv};
  must(drv.check(drv.cuMemAlloc(&d.o, largest.tokens * largest.heads() * 1024), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.positions, largest.tokens * 8), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.cos_sin, largest.max_pos * 256), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.out, largest.tokens * largest.heads() * 512), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.scales, largest.heads() * 16 * largest.padded()), "alloc"),
       "alloc");
  // Random bf16 in a moderate range (sign, exponent 0x3c..0x3f, mantissa), positions < max_pos.
  fill_random(drv, d.o, largest.tokens * largest.heads() * 1024, 1, 0x83ff83ff, 0x3c003c00);
  fill_random(drv, d.cos_sin, largest.max_pos * 256, 2, 0x007fffff, 0x3f000000);
  std::vector<int64_t> positions(largest.tokens);
  std::mt19937 generator(3);
  for (int64_t& p : positions)
    p = generator() % largest.max_pos;
  must(drv.check(drv.cuMemcpyHtoD(d.positions, positions.data(), positions.size() * 8), "copy"),
       "copy");
  CUstream stream = nullptr;
  must(drv.check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"), "stream");

  llvm::json::Array rows;
  std::printf("inv_rope_fp8_quant, G=%lld x %lld heads\n", static_cast<long long>(groups),
              static_cast<long long>(hpg));
  std::printf("%8s %10s %10s %12s\n", "T", "us", "TB/s", "timing");
  for (int64_t tokens : token_counts) {
    Problem p{tokens, groups, hpg};
    double us = time_us(engine, d, p, stream);
    double tbps = p.bytes() / (us * 1e-6) / 1e12;
    const char* method = tokens <= 512 ? "graph x100" : "graph x10";
    std::printf("%8lld %10.2f %10.3f %12s\n", static_cast<long long>(tokens), us, tbps, method);
    rows.push_back(llvm::json::Object{{"tokens", tokens}, {"us", us}, {"tb_per_s", tbps},
                                      {"bytes", p.bytes()}, {"timing", method}});
  }
  runtime::EngineStats stats = engine.stats();
  std::printf("variants compiled or loaded: %llu (one serves every T)\n",
              static_cast<unsigned long long>(stats.compiles + stats.disk_hits));
  if (std::string path = flags.get("--json", ""); !path.empty())
    return write_report(path, llvm::json::Object{{"kernel", "inv_rope_fp8_quant"},
                                                 {"groups", groups},
                                                 {"heads_per_group", hpg},
                                                 {"rows", std::move(rows)},
                                                 {"variants", static_cast<int64_t>(
                                                                  stats.compiles + stats.disk_hits)}})
               ? 0
               : 1;
  return 0;
}

} // namespace specjit::bench
