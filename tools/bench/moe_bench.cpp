// specjit-bench moe: the fused MoE layer on the three reference shapes (KERNELS.md, "Fused
// MoE"), FP8 and bf16, T in {1, 4, 16, 64, 256, 1024, 4096}: GEMM-only µs (GEMM1 + GEMM2, the
// peer's measure) and whole-layer µs (routing, grouping, GEMMs, reduction), fraction of the
// memory floor (distinct experts' w13 + w2 bytes / 4.46 TB/s), TFLOP/s, next to vLLM's Triton
// figures. Timed as CUDA-graph replays of many launches (device events); successive launches
// rotate over k_weight_copies copies of the weights, so no launch finds its experts in the
// 50 MB L2 the previous one filled (the floor is an HBM floor).
//   --tune   measures candidate tile configurations per token-count bucket and writes the
//            table (runtime/ops/moe_config.h) to --table-out (default docs/moe-configs-h200.json)
//            and the swap-AB vs normal crossover (best of each orientation per T) to
//            --crossover (default docs/bench/moe-crossover-h200.json)
//   --table  uses a tuned table instead of the default rule
#include "bench_common.h"

#include "runtime/driver.h"
#include "runtime/ops/fused_moe.h"

#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace specjit::bench {

namespace {

using namespace specjit::ops;
using runtime::DType;

constexpr double k_stream_bytes_per_s = 4.46e12;
constexpr int k_weight_copies = 3;

template <typename T> T must(llvm::Expected<T> value, const char* what) {
  if (!value) {
    llvm::errs() << "specjit-bench moe: " << what << ": " << llvm::toString(value.takeError())
                 << "\n";
    std::exit(1);
  }
  return std::move(*value);
}

void must(llvm::Error err, const char* what) {
  if (err) {
    llvm::errs() << "specjit-bench moe: " << what << ": " << llvm::toString(std::move(err)) << "\n";
    std::exit(1);
  }
}

struct Model {
  const char* name;
  MoeShape shape;
  double peer_us[7]; // vLLM Triton GEMM-only, FP8, at k_tokens
};

const int64_t k_tokens[] = {1, 4, 16, 64, 256, 1024, 4096};
const Model k_models[] = {
    {"qwen3-30b-a3b", {128, 8, 2048, 768, MoeDType::fp8}, {18.6, 41.5, 100.9, 152.2, 167.3, 211.6, 538.0}},
    {"mixtral-8x7b", {8, 2, 4096, 14336, MoeDType::fp8}, {101.4, 253.2, 327.7, 332.9, 385.6, 847.3, 2686.2}},
    {"deepseek-v3-tp8", {256, 8, 7168, 256, MoeDType::fp8}, {30.1, 53.9, 139.9, 302.6, 359.7, 464.1, 863.8}},
};

struct Buffers {
  const runtime::Driver& drv;
  CUdeviceptr x = 0, logits = 0, scales = 0, out = 0, work = 0;
  CUdeviceptr w13[k_weight_copies] = {}, w2[k_weight_copies] = {};
  ~Buffers() {
    for (CUdeviceptr p : {x, logits, scales, out, work})
      if (p)
        drv.cuMemFree(p);
    for (int c = 0; c < k_weight_copies; ++c)
      for (CUdeviceptr p : {w13[c], w2[c]})
        if (p)
          drv.cuMemFree(p);
  }
};

CUdeviceptr alloc(const runtime::Driver& drv, size_t bytes, uint32_t pattern) {
  CUdeviceptr p = 0;
  must(drv.check(drv.cuMemAlloc(&p, std::max<size_t>(bytes, 256)), "cuMemAlloc"), "alloc");
  must(drv.check(drv.cuMemsetD32(p, pattern, std::max<size_t>(bytes, 256) / 4), "cuMemsetD32"),
       "fill");
  return p;
}

FusedMoeTensors tensors(const Buffers& b, const MoeShape& s, int64_t tokens, int copy = 0) {
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
  t.workspace = {b.work, DType::u8, {static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes)}, {}};
  return t;
}

// Median µs of one call, from graph replays of `per_graph` calls, call i on weight copy
// i % k_weight_copies.
double time_us(runtime::Engine& engine, const runtime::Driver& drv, const MoeShape& s,
               const Buffers& b, int64_t tokens, const FusedMoeOptions& options,
               CUstream stream) {
  const FusedMoeTensors t = tensors(b, s, tokens);
  must(fused_moe(engine, s, t, options, stream), "warm-up");
  CUevent start, stop;
  drv.cuEventCreate(&start, CU_EVENT_DEFAULT);
  drv.cuEventCreate(&stop, CU_EVENT_DEFAULT);
  drv.cuEventRecord(start, stream);
  must(fused_moe(engine, s, t, options, stream), "probe");
  drv.cuEventRecord(stop, stream);
  drv.cuEventSynchronize(stop);
  float probe_ms = 0;
  drv.cuEventElapsedTime(&probe_ms, start, stop);
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
    drv.cuEventRecord(start, stream);
    must(drv.check(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch"), "replay");
    drv.cuEventRecord(stop, stream);
    drv.cuEventSynchronize(stop);
    float ms = 0;
    drv.cuEventElapsedTime(&ms, start, stop);
    samples.push_back(ms * 1000.0 / per_graph);
  }
  drv.cuGraphExecDestroy(exec);
  drv.cuEventDestroy(start);
  drv.cuEventDestroy(stop);
  return median(samples);
}

struct Setup {
  std::unique_ptr<Buffers> buffers;
  int64_t max_tokens = 0;
};

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
  std::vector<float> logits(max_tokens * s.experts);
  std::mt19937 generator(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& l : logits)
    l = normal(generator);
  b.logits = alloc(drv, logits.size() * 4, 0);
  must(drv.check(drv.cuMemcpyHtoD(b.logits, logits.data(), logits.size() * 4), "upload"), "upload");
  return setup;
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

GemmTile wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups, int split_k = 1,
                    int tiles = 1) {
  return GemmTile::wgmma_tile(block_n, stages, swap_ab, warpgroups, split_k, tiles);
}

// Candidate tiles for `tokens` on sm_90a: swap-AB and normal wgmma tiles for every T (the
// crossover is measured, not assumed), plus the mma.sync tiles of part 1.
std::vector<MoeTileConfig> candidates(const MoeShape& s, int64_t tokens, const Arch& arch) {
  const int64_t per_expert = (tokens * s.top_k + s.experts - 1) / s.experts;
  std::vector<MoeTileConfig> list = {default_moe_config(s, tokens, arch)};
  auto add = [&](int bm, GemmTile g1, GemmTile g2) { list.push_back({bm, g1, g2}); };
  int bm = 8;
  while (bm < per_expert && bm < 128)
    bm *= 2;
  for (int m : {bm, bm / 2, bm * 2}) {
    if (m < 8 || m > 256)
      continue;
    add(m, wgmma_tile(128, 6, true, 1), wgmma_tile(64, 8, true, 1));
    add(m, wgmma_tile(128, 4, true, 1), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(128, 6, true, 2), wgmma_tile(64, 8, true, 2)); // K split in two
    add(m, wgmma_tile(128, 4, true, 2), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(128, 8, true, 2), wgmma_tile(64, 4, true, 1));
    add(m, wgmma_tile(128, 8, true, 1), wgmma_tile(64, 4, true, 2));
    add(m, wgmma_tile(64, 8, true, 1), wgmma_tile(64, 4, true, 1)); // GEMM1 packed: 2x the CTAs
    add(m, wgmma_tile(64, 8, true, 2), wgmma_tile(64, 6, true, 1));
    add(m, wgmma_tile(64, 6, true, 1), wgmma_tile(64, 6, true, 1));
  }
  if (per_expert <= 8) {
    // Split-K clusters: more CTAs streaming weights when few experts are hit.
    for (int split : {2, 4}) {
      add(bm, wgmma_tile(128, 6, true, 1, split), wgmma_tile(64, 8, true, 1, split));
      add(bm, wgmma_tile(128, 6, true, 1, split), wgmma_tile(64, 8, true, 1));
      add(bm, wgmma_tile(64, 8, true, 1, split), wgmma_tile(64, 8, true, 1, split));
      add(bm, wgmma_tile(128, 6, true, 2, split), wgmma_tile(64, 8, true, 2, split));
      add(bm, wgmma_tile(64, 8, true, 2, split), wgmma_tile(64, 6, true, 1, split));
    }
    add(bm, wgmma_tile(128, 6, true, 1, 8), wgmma_tile(64, 8, true, 1, 2));
    add(bm, wgmma_tile(64, 8, true, 1, 8), wgmma_tile(64, 8, true, 1, 4));
  }
  if (per_expert <= 32) {
    // Several tiles per CTA: longer pipelines for GEMMs whose K is a few stages.
    for (int tiles : {2, 4, 8})
      for (const GemmTile& g1 : {wgmma_tile(128, 6, true, 1, 4), wgmma_tile(64, 8, true, 2),
                                 wgmma_tile(128, 4, true, 1), wgmma_tile(128, 6, true, 1, 1, tiles)})
        add(bm, g1, wgmma_tile(64, 8, true, 1, 1, tiles));
  }
  for (int wg : {1, 2}) {
    add(64 * wg, wgmma_tile(256, 4, false, wg), wgmma_tile(256, 4, false, wg)); // bf16 only
    add(64 * wg, wgmma_tile(128, 5, false, wg), wgmma_tile(128, 5, false, wg));
    add(64 * wg, wgmma_tile(128, 4, false, wg), wgmma_tile(128, 6, false, wg));
    add(64 * wg, wgmma_tile(64, 6, false, wg), wgmma_tile(128, 4, false, wg));
  }
  if (per_expert <= 16) {
    add(16, {64, 1, 4, 4}, {64, 1, 4, 4});
    add(16, {32, 1, 2, 6}, {32, 1, 2, 6});
  } else if (per_expert <= 128) {
    add(64, {128, 2, 2, 4}, {128, 2, 2, 4});
  } else {
    add(128, {128, 2, 4, 3}, {128, 2, 4, 3});
  }
  std::vector<MoeTileConfig> valid;
  for (const MoeTileConfig& c : list) {
    if (auto err = check_moe_config(s, c, arch)) {
      llvm::consumeError(std::move(err));
      continue;
    }
    if (std::find(valid.begin(), valid.end(), c) == valid.end())
      valid.push_back(c);
  }
  return valid;
}

// The orientation family of a configuration, for the crossover table.
const char* family(const MoeTileConfig& c) {
  if (c.gemm1.kernel != MoeGemmKernel::wgmma || c.gemm2.kernel != MoeGemmKernel::wgmma)
    return "mma";
  if (c.gemm1.swap_ab && c.gemm2.swap_ab)
    return "swap_ab";
  if (!c.gemm1.swap_ab && !c.gemm2.swap_ab)
    return "normal";
  return "mixed";
}

// Compiles every candidate's variants on all cores first (the engine is thread-safe).
void precompile(runtime::Engine& engine, const MoeShape& s,
                const std::vector<std::pair<int64_t, MoeTileConfig>>& work) {
  std::vector<runtime::VariantRequest> requests;
  for (const auto& [tokens, config] : work) {
    FusedMoeOptions options;
    options.config = config;
    auto list = must(fused_moe_variants(s, options, engine.arch(), {tokens}), "variants");
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

} // namespace

int run_moe_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2,
                   {"--json", "--table", "--table-out", "--crossover", "--models", "--dtypes",
                    "--tokens"},
                   {"--help", "--tune"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs() << "usage: specjit-bench moe [--json PATH] [--table PATH] [--tune "
                    "[--table-out PATH]] [--models qwen3,mixtral,deepseek] [--dtypes fp8,bf16]\n"
                    "                         [--tokens 1,4,...]\n"
                    "  --tokens   only these of the token counts 1,4,16,64,256,1024,4096; with --tune\n"
                    "             and --table, the table's other buckets are kept as they are\n";
    return 0;
  }
  auto config = must(Config::from_environment(), "config");
  runtime::Engine engine(config);
  must(engine.make_context_current(), "device");
  const runtime::Driver& drv = must(runtime::driver(), "driver");
  CUstream stream = nullptr;
  must(drv.check(drv.cuStreamCreate(&stream, 0), "cuStreamCreate"), "stream");

  MoeConfigTable table;
  const bool use_table = !flags.get("--table", "").empty(); // a value flag: has() is for switches
  if (use_table) {
    auto buffer = must(llvm::errorOrToExpected(llvm::MemoryBuffer::getFile(flags.get("--table", ""))),
                       "read table");
    table = must(parse_moe_config_table(buffer->getBuffer()), "parse table");
  }
  const std::string models = flags.get("--models", "qwen3,mixtral,deepseek");
  const std::string dtypes = flags.get("--dtypes", flags.has("--tune") ? "fp8,bf16" : "fp8,bf16");
  std::vector<int64_t> token_counts;
  for (llvm::StringRef rest = flags.get("--tokens", ""); !rest.empty();) {
    auto [word, tail] = rest.split(',');
    rest = tail;
    int64_t value = 0;
    if (word.getAsInteger(10, value) ||
        std::find(std::begin(k_tokens), std::end(k_tokens), value) == std::end(k_tokens)) {
      llvm::errs() << "specjit-bench moe: --tokens: '" << word
                   << "' is not one of 1,4,16,64,256,1024,4096\n";
      return 2;
    }
    token_counts.push_back(value);
  }
  auto selected = [&](int64_t tokens) {
    return token_counts.empty() ||
           std::find(token_counts.begin(), token_counts.end(), tokens) != token_counts.end();
  };

  llvm::json::Array rows, crossover;
  MoeConfigTable tuned = table; // --tune --table: the shapes not run keep their entries
  llvm::outs() << fmt::format(
      "{:<16} {:>4} {:>5} {:>9} {:>9} {:>7} {:>7} {:>9} {:>7} {:>8} {:>9} {:>7}  {}\n", "model", "dt",
      "T", "gemm_us", "no_pdl", "g1", "g2", "layer_us", "floor%", "TFLOP/s", "peer_us", "x_peer",
      "config");
  for (const Model& model : k_models) {
    if (models.find(std::string(model.name).substr(0, 5)) == std::string::npos)
      continue;
    for (MoeDType dtype : {MoeDType::fp8, MoeDType::bf16}) {
      if (dtypes.find(moe_dtype_name(dtype).str()) == std::string::npos)
        continue;
      MoeShape s = model.shape;
      s.dtype = dtype;
      Setup setup = make_setup(drv, s, 4096);
      const double expert_bytes = (3.0 * s.intermediate * s.hidden) * (dtype == MoeDType::fp8 ? 1 : 2);
      MoeConfigEntry entry{s, engine.arch(), {}};
      if (const MoeConfigEntry* base = use_table ? table.find(s, engine.arch()) : nullptr)
        entry.buckets = base->buckets; // a partial tune replaces only the buckets it measures
      if (flags.has("--tune")) {
        std::vector<std::pair<int64_t, MoeTileConfig>> work;
        for (int64_t bucket : k_tokens)
          if (selected(bucket))
            for (const MoeTileConfig& c : candidates(s, bucket, engine.arch()))
              work.push_back({bucket, c});
        precompile(engine, s, work);
      } else if (!use_table) {
        std::vector<std::pair<int64_t, MoeTileConfig>> work;
        for (int64_t tokens : k_tokens)
          if (selected(tokens))
            work.push_back({tokens, must(resolve_moe_config(s, tokens, engine.arch(), nullptr), "config").config});
        precompile(engine, s, work);
      }
      for (size_t i = 0; i < std::size(k_tokens); ++i) {
        const int64_t tokens = k_tokens[i];
        if (!selected(tokens))
          continue;
        FusedMoeTensors t = tensors(*setup.buffers, s, tokens);
        FusedMoeOptions options;
        if (use_table)
          options.table = &table;
        MoeTileConfig chosen = must(resolve_moe_config(s, tokens, engine.arch(), options.table), "config").config;
        if (flags.has("--tune")) {
          double best = 1e30;
          std::map<std::string, std::pair<double, std::string>> best_of; // per family
          for (const MoeTileConfig& c : candidates(s, tokens, engine.arch())) {
            FusedMoeOptions o;
            o.config = c;
            // A candidate the device rejects is reported and skipped, never fatal.
            if (llvm::Error err = fused_moe(engine, s, t, o, stream)) {
              llvm::errs() << "specjit-bench moe: candidate " << c.describe() << " at T=" << tokens
                           << " failed: " << llvm::toString(std::move(err)) << "\n";
              must(drv.check(drv.cuCtxSynchronize(), "sync"), "sync");
              continue;
            }
            o.stages = moe_stage_gemm1 | moe_stage_gemm2;
            const double us = time_us(engine, drv, s, *setup.buffers, tokens, o, stream);
            auto& slot = best_of[family(c)];
            if (slot.second.empty() || us < slot.first)
              slot = {us, c.describe()};
            if (us < best) {
              best = us;
              chosen = c;
            }
          }
          auto at = std::find_if(entry.buckets.begin(), entry.buckets.end(),
                                 [&](const MoeConfigBucket& b) { return b.max_tokens >= tokens; });
          if (at != entry.buckets.end() && at->max_tokens == tokens)
            at->config = chosen;
          else
            entry.buckets.insert(at, {tokens, chosen});
          options.config = chosen;
          llvm::json::Object cross{{"model", model.name},
                                   {"dtype", moe_dtype_name(dtype)},
                                   {"tokens", tokens},
                                   {"tokens_per_expert",
                                    static_cast<double>(tokens * s.top_k) / s.experts},
                                   {"winner", family(chosen)}};
          for (const auto& [name, result] : best_of)
            cross[name] = llvm::json::Object{{"gemm_us", result.first}, {"config", result.second}};
          crossover.push_back(std::move(cross));
        }
        const double layer_us = time_us(engine, drv, s, *setup.buffers, tokens, options, stream);
        FusedMoeOptions gemms = options;
        gemms.stages = moe_stage_gemm1 | moe_stage_gemm2;
        const double gemm_us = time_us(engine, drv, s, *setup.buffers, tokens, gemms, stream);
        // The same layer with GEMM2 in plain stream order (no programmatic launch), for the
        // launch-gap comparison.
        FusedMoeOptions plain = options;
        plain.programmatic_launch = false;
        const double layer_plain_us = time_us(engine, drv, s, *setup.buffers, tokens, plain, stream);
        plain.stages = moe_stage_gemm1 | moe_stage_gemm2;
        const double gemm_plain_us = time_us(engine, drv, s, *setup.buffers, tokens, plain, stream);
        // Each GEMM alone (plain stream order), to show where the GEMM time goes.
        plain.stages = moe_stage_gemm1;
        const double gemm1_us = time_us(engine, drv, s, *setup.buffers, tokens, plain, stream);
        plain.stages = moe_stage_gemm2;
        const double gemm2_us = time_us(engine, drv, s, *setup.buffers, tokens, plain, stream);
        const int64_t distinct = distinct_experts(drv, *setup.buffers, s, tokens);
        const double floor_us = distinct * expert_bytes / k_stream_bytes_per_s * 1e6;
        const double flops = 2.0 * tokens * s.top_k * 3.0 * s.intermediate * s.hidden;
        const double tflops = flops / (gemm_us * 1e-6) / 1e12;
        const double peer = dtype == MoeDType::fp8 ? model.peer_us[i] : 0.0;
        llvm::outs() << fmt::format(
            "{:<16} {:>4} {:>5} {:>9.1f} {:>9.1f} {:>7.1f} {:>7.1f} {:>9.1f} {:>6.0f}% {:>8.1f} {:>9} "
            "{:>7}  {}\n",
            model.name, moe_dtype_name(dtype).str(), tokens, gemm_us, gemm_plain_us, gemm1_us,
            gemm2_us, layer_us, 100.0 * floor_us / gemm_us,
            tflops, peer > 0 ? fmt::format("{:.1f}", peer) : "-",
            peer > 0 ? fmt::format("{:.2f}x", peer / gemm_us) : "-", chosen.describe());
        llvm::outs().flush();
        llvm::json::Object row{{"model", model.name},
                               {"dtype", moe_dtype_name(dtype)},
                               {"tokens", tokens},
                               {"experts", s.experts},
                               {"top_k", s.top_k},
                               {"hidden", s.hidden},
                               {"intermediate", s.intermediate},
                               {"gemm_us", gemm_us},
                               {"layer_us", layer_us},
                               {"gemm_us_without_pdl", gemm_plain_us},
                               {"gemm1_alone_us", gemm1_us},
                               {"gemm2_alone_us", gemm2_us},
                               {"layer_us_without_pdl", layer_plain_us},
                               {"distinct_experts", distinct},
                               {"floor_us", floor_us},
                               {"fraction_of_floor", floor_us / gemm_us},
                               {"tflops", tflops},
                               {"config", chosen.describe()}};
        if (peer > 0) {
          row["peer_gemm_us"] = peer;
          row["speedup_vs_peer"] = peer / gemm_us;
        }
        rows.push_back(std::move(row));
      }
      if (flags.has("--tune")) {
        auto same = std::find_if(tuned.entries.begin(), tuned.entries.end(),
                                 [&](const MoeConfigEntry& e) {
                                   return e.shape == entry.shape && e.arch == entry.arch;
                                 });
        if (same != tuned.entries.end())
          *same = std::move(entry);
        else
          tuned.entries.push_back(std::move(entry));
      }
    }
  }
  if (flags.has("--tune")) {
    const std::string out = flags.get("--table-out", "docs/moe-configs-h200.json");
    std::error_code ec;
    llvm::raw_fd_ostream os(out, ec);
    if (ec) {
      llvm::errs() << "specjit-bench moe: cannot write " << out << ": " << ec.message() << "\n";
      return 1;
    }
    os << llvm::formatv("{0:2}", moe_config_table_to_json(tuned)) << "\n";
    llvm::outs() << "tuned table written to " << out << "\n";
    const std::string cross_path = flags.get("--crossover", "docs/bench/moe-crossover-h200.json");
    if (!write_report(cross_path,
                      llvm::json::Object{{"kernel", "fused_moe GEMM1+GEMM2"},
                                         {"what", "best GEMM-only us per orientation family"},
                                         {"rows", std::move(crossover)}}))
      return 1;
  }
  const std::string path = flags.get("--json", "docs/bench/moe-h200.json");
  return write_report(path, llvm::json::Object{{"kernel", "fused_moe"},
                                               {"timing", "CUDA graph replay, device events, median"},
                                               {"memory_floor_bytes_per_s", k_stream_bytes_per_s},
                                               {"peer", "vLLM Triton fused_moe_kernel, GEMM1+GEMM2, FP8 per-tensor"},
                                               {"tuned", flags.has("--tune")},
                                               {"rows", std::move(rows)}})
             ? 0
             : 1;
}

} // namespace specjit::bench
