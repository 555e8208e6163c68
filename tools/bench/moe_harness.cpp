#include "moe_harness.h"
#include "moe_routing.h"

#include "bench_common.h"

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
  t.a2_scale = {b.scales, DType::f32, {1}, {}};
  t.w13_scale = {b.scales, DType::f32, {s.experts}, {}};
  t.w2_scale = {b.scales, DType::f32, {s.experts}, {}};
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
               const Buffers& b, int64_t tokens, const FusedMoeOptions& options, CUstream stream) {
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
  std::vector<double> samples;
  for (int r = 0; r < 7; ++r) {
    const float ms = timer.ms("replay", [&] {
      must(drv.check(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch"), "replay");
    });
    samples.push_back(ms * 1000.0 / per_graph);
  }
  drv.cuGraphExecDestroy(exec);
  return median(samples);
}

double host_us(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
               const Buffers& b, int64_t tokens, const FusedMoeOptions& options, CUstream stream) {
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

Setup make_setup(const runtime::Driver& drv, const MoeShape& s, int64_t max_tokens) {
  Setup setup;
  setup.max_tokens = max_tokens;
  setup.buffers = std::make_unique<Buffers>(Buffers{drv});
  Buffers& b = *setup.buffers;
  const size_t elem = s.dtype == MoeDType::fp8 ? 1 : 2;
  // Non-zero constant data: 0x38 = 1.0 in e4m3; 0x3c00 = 2^-7 in bf16.
  const uint32_t pattern = s.dtype == MoeDType::fp8 ? 0x38383838u : 0x3c003c00u;
  b.x = alloc(drv, max_tokens * s.hidden * elem, pattern);
  for (int c = 0; c < k_weight_copies; ++c) {
    b.w13[c] = alloc(drv, s.experts * 2 * s.intermediate * s.hidden * elem, pattern);
    b.w2[c] = alloc(drv, s.experts * s.hidden * s.intermediate * elem, pattern);
  }
  b.scales = alloc(drv, s.experts * 4, 0x3c000000u); // 2^-7
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
    FusedMoeOptions options;
    options.config = config;
    options.packed_reads = reads;
    auto list = must(fused_moe_variants(s, options, engine.arch(), {tokens}, layout), "variants");
    requests.insert(requests.end(), list.begin(), list.end());
  }
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
