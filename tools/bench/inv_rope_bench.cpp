// specjit-bench inv-rope: times inv_rope_fp8_quant over token counts with device events
// (graph replay of many launches for small T, where launch cost would dominate) and reports
// µs and effective TB/s (bytes read + written), next to KERNELS.md's targets.
#include "bench_common.h"
#include "bench_data.h"

#include "reference/inv_rope_reference.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <cstring>
#include <random>

namespace specjit::bench {

namespace {

struct Problem {
  int64_t tokens, groups, heads_per_group, max_pos = 8192;
  int64_t heads() const { return groups * heads_per_group; }
  int64_t padded() const { return (tokens + 3) / 4 * 4; }
  size_t in_bytes() const { return static_cast<size_t>(tokens * heads() * 1024); }
  size_t out_bytes() const { return static_cast<size_t>(tokens * heads() * 512); }
  // Launches rotate over this many slots of the input and output pools, so that a launch finds
  // none of its data in the 50 MB L2 (as the peer's figures were measured).
  int64_t slots() const {
    return std::max<int64_t>(2, (k_rotate_bytes + in_bytes() - 1) / in_bytes());
  }
  static constexpr size_t k_rotate_bytes = size_t{256} << 20;
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

llvm::Error launch(runtime::Engine& engine, const Device& d, const Problem& p, CUstream stream,
                   int64_t slot = 0) {
  using runtime::DType;
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = p.groups;
  options.heads_per_group = p.heads_per_group;
  runtime::TensorRef o{d.o + slot * p.in_bytes(), DType::bf16, {p.tokens, p.heads(), 512}, {}};
  runtime::TensorRef positions{d.positions, DType::i64, {p.tokens}, {}};
  runtime::TensorRef cos_sin{d.cos_sin, DType::f32, {p.max_pos, 64}, {}};
  runtime::TensorRef out{d.out + slot * p.out_bytes(), DType::e4m3, {p.groups, p.tokens, p.heads_per_group * 512}, {}};
  runtime::TensorRef scales{d.scales, DType::f32, {p.groups, p.heads_per_group * 4, p.padded()}, {}};
  return ops::inv_rope_fp8_quant(engine, o, positions, cos_sin, out, scales, options, stream);
}

// Launches per graph: 100 for small T, 10 for large T, at least one per slot.
int per_graph(const Problem& p) {
  return static_cast<int>(std::max<int64_t>(p.slots(), p.tokens <= 512 ? 100 : 10));
}

// Median µs per launch, from graph replays (the host's launch path stays out of the kernel's
// time), launch i on slot i % slots.
double time_us(runtime::Engine& engine, const Device& d, const Problem& p, CUstream stream) {
  const runtime::Driver& drv = d.drv;
  const int per_graph = bench::per_graph(p);
  CUgraphExec exec = nullptr;
  if (per_graph > 1) {
    must(drv.check(drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture"),
         "capture");
    for (int i = 0; i < per_graph; ++i)
      must(launch(engine, d, p, stream, i % p.slots()), "launch");
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

// One launch on slot 0, tokens 0, T/2 and T-1 of its output and scales against the CPU
// reference (bit for bit); exits with a message naming T when they differ.
void check(runtime::Engine& engine, const Device& d, const Problem& p, CUstream stream,
           const std::vector<uint16_t>& o, const std::vector<int64_t>& positions,
           const std::vector<float>& cos_sin) {
  const runtime::Driver& drv = d.drv;
  must(launch(engine, d, p, stream), "check");
  must(drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize"), "check");
  const std::vector<int64_t> sample = {0, p.tokens / 2, p.tokens - 1};
  const int64_t row = p.heads() * 512, group_row = p.heads_per_group * 512;
  std::vector<uint16_t> sub_o;
  std::vector<int64_t> sub_positions;
  for (int64_t t : sample) {
    sub_o.insert(sub_o.end(), o.begin() + t * row, o.begin() + (t + 1) * row);
    sub_positions.push_back(positions[t]);
  }
  const reference::InvRopeFp8QuantOutput want = reference::inv_rope_fp8_quant(
      sub_o, sub_positions, cos_sin, p.groups, p.heads_per_group);
  int64_t wrong = 0;
  std::vector<uint8_t> got(group_row);
  for (int64_t g = 0; g < p.groups; ++g)
    for (size_t i = 0; i < sample.size(); ++i) {
      must(drv.check(drv.cuMemcpyDtoH(got.data(), d.out + (g * p.tokens + sample[i]) * group_row,
                                      group_row),
                     "download"),
           "check");
      wrong += !std::equal(got.begin(), got.end(),
                           want.fp8.begin() + (g * sample.size() + i) * group_row);
      for (int64_t b = 0; b < p.heads_per_group * 4; ++b) {
        float scale = 0;
        const size_t at = ((g * p.heads_per_group * 4 + b) * p.padded() + sample[i]) * 4;
        must(drv.check(drv.cuMemcpyDtoH(&scale, d.scales + at, 4), "download"), "check");
        wrong += scale != want.scales[(g * p.heads_per_group * 4 + b) * 4 + i];
      }
    }
  if (wrong > 0) {
    std::fprintf(stderr,
                 "specjit-bench inv-rope: wrong output at T=%lld: %lld rows or scales of tokens "
                 "0, T/2, T-1 differ from the CPU reference\n",
                 static_cast<long long>(p.tokens), static_cast<long long>(wrong));
    std::exit(1);
  }
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
  must(drv.check(drv.cuMemAlloc(&d.o, 2 * largest.in_bytes()), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.positions, largest.tokens * 8), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.cos_sin, largest.max_pos * 256), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.out, 2 * largest.out_bytes()), "alloc"), "alloc");
  must(drv.check(drv.cuMemAlloc(&d.scales, largest.heads() * 16 * largest.padded()), "alloc"),
       "alloc");
  // o: N(0,1) rounded to bf16, in both halves of the pool; cos/sin random in [0.5, 1);
  // positions < max_pos.
  const RandomTensor o = random_tensor(1, largest.tokens * largest.heads() * 512, false, 1.0f, 1);
  for (size_t half : {size_t{0}, largest.in_bytes()})
    must(drv.check(drv.cuMemcpyHtoD(d.o + half, o.bytes.data(), o.bytes.size()), "copy"), "copy");
  std::vector<uint16_t> o_bits(o.bytes.size() / 2);
  std::memcpy(o_bits.data(), o.bytes.data(), o.bytes.size());
  fill_random(drv, d.cos_sin, largest.max_pos * 256, 2, 0x007fffff, 0x3f000000);
  std::vector<float> cos_sin(largest.max_pos * 64);
  must(drv.check(drv.cuMemcpyDtoH(cos_sin.data(), d.cos_sin, cos_sin.size() * 4), "copy"), "copy");
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
    check(engine, d, p, stream, o_bits, positions, cos_sin);
    double tbps = p.bytes() / (us * 1e-6) / 1e12;
    const std::string method =
        fmt::format("graph x{}, {} slots of {:.1f} MB", per_graph(p), p.slots(), p.in_bytes() / 1e6);
    std::printf("%8lld %10.2f %10.3f   %s\n", static_cast<long long>(tokens), us, tbps,
                method.c_str());
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
                                                 {"data", "o N(0,1) in bf16, cos/sin uniform in "
                                                          "[0.5, 1), random positions; inputs and "
                                                          "outputs rotated over >= 256 MiB; every "
                                                          "T checked bit for bit on 3 tokens"},
                                                 {"rows", std::move(rows)},
                                                 {"variants", static_cast<int64_t>(
                                                                  stats.compiles + stats.disk_hits)}})
               ? 0
               : 1;
  return 0;
}

} // namespace specjit::bench
