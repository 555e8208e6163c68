#include "moe_harness.h"
#include "moe_routing.h"

#include "bench_common.h"

#include "reference/inv_rope_reference.h"
#include "reference/moe_reference.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

namespace specjit::bench {

using namespace specjit::ops;
using runtime::DType;

namespace {

CUdeviceptr alloc(const runtime::Driver& drv, size_t bytes, uint32_t pattern) {
  CUdeviceptr p = 0;
  must(drv.check(drv.cuMemAlloc(&p, std::max<size_t>(bytes, 256)), "cuMemAlloc"), "alloc");
  must(drv.check(drv.cuMemsetD32(p, pattern, std::max<size_t>(bytes, 256) / 4), "cuMemsetD32"),
       "fill");
  return p;
}

} // namespace

double device_copy_bytes_per_s(const runtime::Driver& drv) {
  constexpr size_t k_bytes = size_t{1} << 30;
  const CUdeviceptr src = alloc(drv, k_bytes, 0x3c3c3c3c), dst = alloc(drv, k_bytes, 0);
  StreamTimer timer(drv, nullptr);
  std::vector<double> seconds;
  for (int i = 0; i < 6; ++i) { // the first is a warm-up
    const float ms = timer.ms("copy rate", [&] {
      must(drv.check(drv.cuMemcpyDtoD(dst, src, k_bytes), "cuMemcpyDtoD"), "copy rate");
    });
    if (i > 0)
      seconds.push_back(ms * 1e-3);
  }
  drv.cuMemFree(src);
  drv.cuMemFree(dst);
  return 2.0 * k_bytes / median(seconds);
}

FusedMoeTensors tensors(const Buffers& b, const MoeShape& s, int64_t tokens, int copy) {
  const DType dtype = s.dtype == MoeDType::fp8 ? DType::e4m3 : DType::bf16;
  FusedMoeTensors t;
  t.hidden = {b.x, dtype, {tokens, s.hidden}, {}};
  t.router_logits = {b.logits, DType::f32, {tokens, s.experts}, {}};
  t.w13 = {b.w13[copy], dtype, {s.experts, 2 * s.intermediate, s.hidden}, {}};
  t.w2 = {b.w2[copy], dtype, {s.experts, s.hidden, s.intermediate}, {}};
  t.a1_scale = {b.scales, DType::f32, {1}, {}};
  t.a2_scale = {b.scales + 4, DType::f32, {1}, {}};
  t.w13_scale = {b.scales + 8, DType::f32, {s.experts}, {}};
  t.w2_scale = {b.scales + 8 + 4 * s.experts, DType::f32, {s.experts}, {}};
  t.out = {b.out, DType::bf16, {tokens, s.hidden}, {}};
  t.workspace = {
      b.work, DType::u8, {static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes)}, {}};
  t.weight_layout = b.weights;
  return t;
}

void pack_weights(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
                  Buffers& b) {
  const FusedMoeTensors t = tensors(b, s, 1);
  for (int c = 0; c < k_weight_copies; ++c)
    for (auto [weights, shape] :
         {std::pair{&b.w13[c], t.w13.shape}, std::pair{&b.w2[c], t.w2.shape}}) {
      const runtime::TensorRef from{*weights, t.w13.dtype, shape, {}};
      const CUdeviceptr to = alloc(drv, from.numel() * runtime::dtype_size(from.dtype), 0);
      must(moe_pack_weights(engine, from, {to, from.dtype, shape, {}}, nullptr), "pack weights");
      must(drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize"), "pack weights");
      drv.cuMemFree(*weights);
      *weights = to;
    }
  b.weights = MoeWeightLayout::packed;
}

// Median µs of one call, from graph replays of `per_graph` calls, call i on weight copy
// i % k_weight_copies.
double time_us(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
               const Buffers& b, int64_t tokens, const TunedMoeOptions& options, CUstream stream,
               double sustain_ms) {
  const FusedMoeTensors t = tensors(b, s, tokens);
  must(fused_moe(engine, s, t, options, stream), "warm-up");
  StreamTimer timer(drv, stream);
  const float probe_ms =
      timer.ms("probe", [&] { must(fused_moe(engine, s, t, options, stream), "probe"); });
  const int per_graph =
      std::clamp(static_cast<int>(2.0 / std::max(probe_ms, 1e-3f)), k_weight_copies, 48);
  must(drv.check(drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture"),
       "capture");
  for (int i = 0; i < per_graph; ++i)
    must(fused_moe(engine, s, tensors(b, s, tokens, i % k_weight_copies), options, stream),
         "launch");
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  must(drv.check(drv.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture"), "capture");
  must(drv.check(drv.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate"), "graph");
  drv.cuGraphDestroy(graph);
  auto replay = [&] {
    must(drv.check(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch"), "replay");
  };
  for (double ran = 0; ran < sustain_ms;)
    ran += timer.ms("sustain", replay);
  std::vector<double> samples;
  for (int r = 0; r < 7; ++r) {
    const float ms = timer.ms("replay", replay);
    samples.push_back(ms * 1000.0 / per_graph);
  }
  drv.cuGraphExecDestroy(exec);
  return median(samples);
}

double host_us(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
               const Buffers& b, int64_t tokens, const TunedMoeOptions& options, CUstream stream) {
  for (int c = 0; c < k_weight_copies; ++c)
    must(fused_moe(engine, s, tensors(b, s, tokens, c), options, stream), "warm-up");
  std::vector<double> samples;
  for (int i = 0; i < 60; ++i) {
    must(drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize"), "host time");
    const FusedMoeTensors t = tensors(b, s, tokens, i % k_weight_copies);
    const auto start = std::chrono::steady_clock::now();
    must(fused_moe(engine, s, t, options, stream), "host time");
    samples.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  must(drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize"), "host time");
  return median(samples);
}

MoeHostData moe_host_data(const MoeShape& s, int64_t tokens) {
  const bool fp8 = s.dtype == MoeDType::fp8;
  MoeHostData d;
  d.x = random_tensor(1, tokens * s.hidden, fp8, 1.0f, 1);
  d.w13 = random_tensor(s.experts, 2 * s.intermediate * s.hidden, fp8,
                        1.0f / std::sqrt(static_cast<float>(s.hidden)), 2);
  d.w2 = random_tensor(s.experts, s.hidden * s.intermediate, fp8,
                       1.0f / std::sqrt(static_cast<float>(s.intermediate)), 3);
  d.scales = {fp8 ? d.x.scales[0] : 1.0f, fp8 ? 16.0f / 448.0f : 1.0f};
  d.scales.insert(d.scales.end(), d.w13.scales.begin(), d.w13.scales.end());
  d.scales.insert(d.scales.end(), d.w2.scales.begin(), d.w2.scales.end());
  return d;
}

Setup make_setup(const runtime::Driver& drv, const MoeShape& s, int64_t max_tokens) {
  Setup setup;
  setup.max_tokens = max_tokens;
  setup.buffers = std::make_unique<Buffers>(Buffers{drv});
  Buffers& b = *setup.buffers;
  MoeHostData host = moe_host_data(s, max_tokens);
  b.host_x = std::move(host.x);
  b.host_w13 = std::move(host.w13);
  b.host_w2 = std::move(host.w2);
  auto upload = [&](const void* host, size_t bytes) {
    const CUdeviceptr p = alloc(drv, bytes, 0);
    must(drv.check(drv.cuMemcpyHtoD(p, host, bytes), "cuMemcpyHtoD"), "upload");
    return p;
  };
  b.x = upload(b.host_x.bytes.data(), b.host_x.bytes.size());
  for (int c = 0; c < k_weight_copies; ++c) {
    b.w13[c] = upload(b.host_w13.bytes.data(), b.host_w13.bytes.size());
    b.w2[c] = upload(b.host_w2.bytes.data(), b.host_w2.bytes.size());
  }
  b.a1_scale = host.scales[0];
  b.a2_scale = host.scales[1];
  b.scales = upload(host.scales.data(), host.scales.size() * 4);
  b.out = alloc(drv, max_tokens * s.hidden * 2, 0);
  b.work = alloc(drv, moe_workspace_layout(s, max_tokens).bytes, 0);
  b.logits = alloc(drv, max_tokens * s.experts * 4, 0);
  set_router_logits(drv, b, s, max_tokens, k_routing_seed);
  return setup;
}

void set_router_logits(const runtime::Driver& drv, const Buffers& b, const MoeShape& s,
                       int64_t rows, uint32_t seed) {
  const std::vector<float> logits = router_logits(rows, s.experts, seed);
  must(drv.check(drv.cuMemcpyHtoD(b.logits, logits.data(), logits.size() * 4), "upload"), "upload");
}

namespace {

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

} // namespace

void check_layer(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
                 const Buffers& b, int64_t tokens, const TunedMoeOptions& options,
                 CUstream stream) {
  TunedMoeOptions layer = options;
  layer.stages = moe_stage_all;
  must(fused_moe(engine, s, tensors(b, s, tokens), layer, stream), "check");
  must(drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize"), "check");
  const bool fp8 = s.dtype == MoeDType::fp8;
  const size_t elem = fp8 ? 1 : 2;
  reference::MoeWeights w{s.experts, s.top_k, s.hidden, s.intermediate, fp8,
                          b.host_w13.bytes.data(), b.host_w2.bytes.data(), b.a1_scale,
                          b.a2_scale, b.host_w13.scales.data(), b.host_w2.scales.data()};
  const std::vector<float> logits = router_logits(tokens, s.experts, k_routing_seed);
  const reference::MoeRouting routing =
      reference::moe_route(logits.data(), tokens, s.experts, s.top_k, true);
  const std::vector<int64_t> sample = {0, tokens / 2, tokens - 1}; // the same row twice at T = 1
  std::vector<float> got(sample.size() * s.hidden), want(got.size());
  std::vector<uint16_t> out(s.hidden);
  for (size_t i = 0; i < sample.size(); ++i) {
    must(drv.check(drv.cuMemcpyDtoH(out.data(), b.out + sample[i] * s.hidden * 2, s.hidden * 2),
                   "download"),
         "check");
    for (int64_t h = 0; h < s.hidden; ++h)
      got[i * s.hidden + h] = reference::bf16_to_float(out[h]);
  }
  std::vector<std::thread> pool;
  for (size_t i = 0; i < sample.size(); ++i)
    pool.emplace_back([&, i] {
      const int64_t tok = sample[i];
      const void* row = b.host_x.bytes.data() + tok * s.hidden * elem;
      (fp8 ? reference::moe_token_emulated : reference::moe_token_fp32)(
          w, row, &routing.ids[tok * s.top_k], &routing.weights[tok * s.top_k],
          &want[i * s.hidden]);
    });
  for (std::thread& t : pool)
    t.join();
  // A sanity bound, not the accuracy rule (the GPU tests hold that against the float64 truth):
  // e4m3 GEMM1 tiles accumulating over the whole K sit up to 2e-2 from the re-quantizing
  // reference, a broken kernel is off by order 1.
  const double error = relative_error(got, want), limit = fp8 ? 3e-2 : 2e-2;
  if (!(error <= limit)) {
    std::fprintf(stderr,
                 "specjit-bench moe: wrong output: %s T=%lld, relative error %.3g against the CPU "
                 "reference over rows 0, T/2, T-1 (limit %.0e)\n",
                 moe_dtype_name(s.dtype).str().c_str(), static_cast<long long>(tokens), error,
                 limit);
    std::exit(1);
  }
}

int64_t distinct_experts(const runtime::Driver& drv, const Buffers& b, const MoeShape& s,
                         int64_t tokens) {
  std::vector<int32_t> ids(tokens * s.top_k);
  must(drv.check(drv.cuCtxSynchronize(), "sync"), "sync");
  must(drv.check(drv.cuMemcpyDtoH(ids.data(), b.work + moe_workspace_layout(s, tokens).topk_ids,
                                  ids.size() * 4),
                 "download"),
       "download");
  return static_cast<int64_t>(std::set<int32_t>(ids.begin(), ids.end()).size());
}

// Compiles every candidate's variants on all cores first (the engine is thread-safe).
void precompile(runtime::Engine& engine, const MoeShape& s,
                const std::vector<std::pair<int64_t, MoeTileConfig>>& work, MoeWeightLayout layout,
                MoePackedReads reads) {
  std::vector<runtime::VariantRequest> requests;
  for (const auto& [tokens, config] : work) {
    TunedMoeOptions options;
    options.config = config;
    options.packed_reads = reads;
    auto list = must(fused_moe_variants(s, options, engine.arch(), {tokens}, layout), "variants");
    requests.insert(requests.end(), list.begin(), list.end());
  }
  prepare_requests(engine, requests);
}

void prepare_requests(runtime::Engine& engine,
                      const std::vector<runtime::VariantRequest>& requests) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(1u, std::thread::hardware_concurrency()); ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < requests.size();) {
        auto id = engine.add_kernel(requests[i].def);
        if (id)
          llvm::consumeError(engine.prepare(*id, requests[i].values).takeError());
        else
          llvm::consumeError(id.takeError());
      }
    });
  for (std::thread& t : pool)
    t.join();
}

} // namespace specjit::bench
