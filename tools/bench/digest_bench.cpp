// specjit-bench digest: runs the built-in ops on seeded random data and prints an XXH3-128
// digest of every output tensor, one line each, so that two builds of the library (before and
// after a change that must keep the kernels' outputs byte for byte) can be run on one GPU and
// their outputs compared with diff:
//   <op> <model> <dtype> <case> T=<tokens> <tensor> <32 hex digits>
// Each case runs twice, its outputs filled with different bytes before each run: a digest that
// differs between the two runs (an output left unwritten, or a result that varies from run to
// run) is printed as "unstable" and fails the run, as does any error.
#include "bench_common.h"
#include "bench_data.h"
#include "moe_models.h"
#include "moe_routing.h"

#include "runtime/ops/fused_moe.h"
#include "runtime/ops/moe_tuning.h"
#include "runtime/ops/inv_rope_fp8_quant.h"

#include "support/hash.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

namespace specjit::bench {

namespace {

using runtime::DType;

// Device memory freed with the object.
struct DeviceBuffer {
  const runtime::Driver& drv;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const runtime::Driver& d, size_t size) : drv(d), bytes(std::max<size_t>(size, 256)) {
    must(drv.check(drv.cuMemAlloc(&ptr, bytes), "cuMemAlloc"), "alloc");
    must(drv.check(drv.cuMemsetD8(ptr, 0, bytes), "cuMemsetD8"), "alloc");
  }
  ~DeviceBuffer() { drv.cuMemFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* host, size_t size) const {
    must(drv.check(drv.cuMemcpyHtoD(ptr, host, size), "cuMemcpyHtoD"), "upload");
  }
};

// The XXH3-128 of `bytes` bytes at `ptr` (the stream synchronized first).
std::string device_digest(const runtime::Driver& drv, CUdeviceptr ptr, size_t bytes) {
  must(drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize"), "digest");
  std::string host(bytes, '\0');
  must(drv.check(drv.cuMemcpyDtoH(host.data(), ptr, bytes), "cuMemcpyDtoH"), "digest");
  return hash128(host).hex();
}

// One output tensor of a case: where it lies and its size.
struct Output {
  const char* name;
  CUdeviceptr ptr;
  size_t bytes;
};

// Counts what went wrong; main returns non-zero when anything did.
struct Tally {
  int lines = 0, failures = 0;
};

// Runs `run` twice, the outputs filled with 0x00 and then 0xA5 before each run, and prints one
// line per output: its digest, or "unstable" when the two runs differ.
void run_case(const runtime::Driver& drv, const std::string& prefix,
              const std::vector<Output>& outputs, const std::function<llvm::Error()>& run,
              Tally& tally) {
  std::vector<std::string> first;
  for (unsigned char fill : {0x00, 0xA5}) {
    for (const Output& o : outputs)
      must(drv.check(drv.cuMemsetD8(o.ptr, fill, o.bytes), "cuMemsetD8"), "fill");
    // The op runs on a stream that does not wait for the legacy stream's memsets.
    must(drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize"), "fill");
    if (llvm::Error err = run()) {
      std::printf("%s error %s\n", prefix.c_str(), llvm::toString(std::move(err)).c_str());
      ++tally.failures;
      return;
    }
    std::vector<std::string> digests;
    for (const Output& o : outputs)
      digests.push_back(device_digest(drv, o.ptr, o.bytes));
    if (first.empty()) {
      first = std::move(digests);
      continue;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const bool stable = digests[i] == first[i];
      std::printf("%s %s %s\n", prefix.c_str(), outputs[i].name,
                  stable ? first[i].c_str() : "unstable");
      tally.failures += stable ? 0 : 1;
      ++tally.lines;
    }
  }
  std::fflush(stdout);
}

// ---- fused MoE ----

// A model's layer on the device: random activations and weights as `specjit-bench moe` draws
// them (bench_data's seeds 1-3), the fixed routing's logits, both weight layouts.
struct MoeLayer {
  ops::MoeShape s;
  int64_t max_tokens;
  DeviceBuffer x, w13, w2, w13_packed, w2_packed, scales, logits, out, work;
  MoeLayer(const runtime::Driver& drv, const ops::MoeShape& shape, int64_t tokens)
      : s(shape), max_tokens(tokens), x(drv, tokens * s.hidden * elem()),
        w13(drv, s.experts * 2 * s.intermediate * s.hidden * elem()),
        w2(drv, s.experts * s.hidden * s.intermediate * elem()), w13_packed(drv, w13.bytes),
        w2_packed(drv, w2.bytes), scales(drv, (2 + 2 * s.experts) * 4),
        logits(drv, tokens * s.experts * 4), out(drv, tokens * s.hidden * 2),
        work(drv, ops::moe_workspace_layout(s, tokens).bytes) {
    const bool fp8 = s.dtype == ops::MoeDType::fp8;
    const RandomTensor hx = random_tensor(1, tokens * s.hidden, fp8, 1.0f, 1);
    const RandomTensor hw13 = random_tensor(s.experts, 2 * s.intermediate * s.hidden, fp8,
                                            1.0f / std::sqrt(static_cast<float>(s.hidden)), 2);
    const RandomTensor hw2 = random_tensor(s.experts, s.hidden * s.intermediate, fp8,
                                           1.0f / std::sqrt(static_cast<float>(s.intermediate)), 3);
    x.upload(hx.bytes.data(), hx.bytes.size());
    w13.upload(hw13.bytes.data(), hw13.bytes.size());
    w2.upload(hw2.bytes.data(), hw2.bytes.size());
    std::vector<float> host_scales = {fp8 ? hx.scales[0] : 1.0f, fp8 ? 16.0f / 448.0f : 1.0f};
    host_scales.insert(host_scales.end(), hw13.scales.begin(), hw13.scales.end());
    host_scales.insert(host_scales.end(), hw2.scales.begin(), hw2.scales.end());
    scales.upload(host_scales.data(), host_scales.size() * 4);
    const std::vector<float> host_logits = router_logits(tokens, s.experts, k_routing_seed);
    logits.upload(host_logits.data(), host_logits.size() * 4);
  }
  size_t elem() const { return s.dtype == ops::MoeDType::fp8 ? 1 : 2; }
  DType dtype() const { return s.dtype == ops::MoeDType::fp8 ? DType::e4m3 : DType::bf16; }

  ops::FusedMoeTensors tensors(int64_t tokens, ops::MoeWeightLayout layout) const {
    const bool packed = layout == ops::MoeWeightLayout::packed;
    ops::FusedMoeTensors t;
    t.hidden = {x.ptr, dtype(), {tokens, s.hidden}, {}};
    t.router_logits = {logits.ptr, DType::f32, {tokens, s.experts}, {}};
    t.w13 = {packed ? w13_packed.ptr : w13.ptr, dtype(), {s.experts, 2 * s.intermediate, s.hidden},
             {}};
    t.w2 = {packed ? w2_packed.ptr : w2.ptr, dtype(), {s.experts, s.hidden, s.intermediate}, {}};
    t.a1_scale = {scales.ptr, DType::f32, {1}, {}};
    t.a2_scale = {scales.ptr + 4, DType::f32, {1}, {}};
    t.w13_scale = {scales.ptr + 8, DType::f32, {s.experts}, {}};
    t.w2_scale = {scales.ptr + 8 + 4 * s.experts, DType::f32, {s.experts}, {}};
    t.out = {out.ptr, DType::bf16, {tokens, s.hidden}, {}};
    t.workspace = {
        work.ptr, DType::u8, {static_cast<int64_t>(ops::moe_workspace_layout(s, tokens).bytes)}, {}};
    t.weight_layout = layout;
    return t;
  }
};

// The cases every (model, dtype, T) runs: the options a serving call uses (the built-in table,
// row-major and packed weights), the default rule, the mma.sync tiles, and the schedule
// choices that must not change a byte (the block hand-off, the launch order, PDL).
struct MoeCase {
  const char* name;
  ops::MoeWeightLayout layout;
  std::function<void(ops::TunedMoeOptions&, const ops::MoeShape&, int64_t)> set;
};

std::vector<MoeCase> moe_cases() {
  using L = ops::MoeWeightLayout;
  auto none = [](ops::TunedMoeOptions&, const ops::MoeShape&, int64_t) {};
  return {
      {"table", L::row_major, none},
      {"packed", L::packed, none},
      {"rule", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) { o.table = nullptr; }},
      {"mma", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape& s, int64_t tokens) {
         // The mma.sync rule's tiles as the case was first defined: sm_80's rule sized for
         // 132 SMs, whatever the target's documented count.
         runtime::DeviceFacts target = runtime::DeviceFacts::for_target(Arch{8, 0, false});
         target.multiprocessors = 132;
         o.config = ops::default_moe_config(s, tokens, target);
       }},
      {"handoff-always", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.handoff = ops::MoeHandoff::always;
       }},
      {"handoff-never", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.handoff = ops::MoeHandoff::never;
       }},
      {"block-major", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.launch_order = ops::MoeLaunchOrder::block_major;
       }},
      {"no-pdl", L::row_major,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.programmatic_launch = false;
       }},
      {"packed-bulk", L::packed,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.packed_reads = ops::MoePackedReads::bulk;
       }},
      {"packed-map", L::packed,
       [](ops::TunedMoeOptions& o, const ops::MoeShape&, int64_t) {
         o.packed_reads = ops::MoePackedReads::tensor_map;
       }},
  };
}

// Compiles (or loads) every variant the cases below launch, on all cores, before they run one by
// one: a fresh cache holds none of them.
void prepare_moe(runtime::Engine& engine, const ops::MoeShape& s,
                 const std::vector<int64_t>& token_counts,
                 const std::vector<std::string>& case_names) {
  std::vector<runtime::VariantRequest> requests;
  for (const MoeCase& c : moe_cases()) {
    if (!case_names.empty() &&
        std::find(case_names.begin(), case_names.end(), c.name) == case_names.end())
      continue;
    for (int64_t tokens : token_counts) {
      ops::TunedMoeOptions options;
      c.set(options, s, tokens);
      auto list = ops::fused_moe_variants(s, options, engine.arch(), {tokens}, c.layout);
      if (!list) { // the case's run reports it
        llvm::consumeError(list.takeError());
        continue;
      }
      requests.insert(requests.end(), list->begin(), list->end());
    }
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

void digest_moe(runtime::Engine& engine, const runtime::Driver& drv, const Model& model,
                ops::MoeDType dtype, const std::vector<int64_t>& token_counts,
                const std::vector<std::string>& case_names, CUstream stream, Tally& tally) {
  ops::MoeShape s = model.shape;
  s.dtype = dtype;
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  prepare_moe(engine, s, token_counts, case_names);
  MoeLayer layer(drv, s, max_tokens);
  const std::string shape_prefix =
      fmt::format("moe {} {}", model.name, ops::moe_dtype_name(dtype).str());
  // The packed copies, digested too: moe_pack_weights is one of the op's kernels.
  run_case(
      drv, shape_prefix + " pack T=0",
      {{"w13_packed", layer.w13_packed.ptr, layer.w13_packed.bytes},
       {"w2_packed", layer.w2_packed.ptr, layer.w2_packed.bytes}},
      [&]() -> llvm::Error {
        const ops::FusedMoeTensors t = layer.tensors(1, ops::MoeWeightLayout::row_major);
        if (auto err = ops::moe_pack_weights(engine, t.w13,
                                             {layer.w13_packed.ptr, t.w13.dtype, t.w13.shape, {}},
                                             stream))
          return err;
        return ops::moe_pack_weights(engine, t.w2,
                                     {layer.w2_packed.ptr, t.w2.dtype, t.w2.shape, {}}, stream);
      },
      tally);
  for (const MoeCase& c : moe_cases()) {
    if (!case_names.empty() &&
        std::find(case_names.begin(), case_names.end(), c.name) == case_names.end())
      continue;
    for (int64_t tokens : token_counts) {
      const ops::MoeWorkspaceLayout w = ops::moe_workspace_layout(s, tokens);
      const size_t slots = static_cast<size_t>(tokens * s.top_k);
      const std::vector<Output> outputs = {
          {"out", layer.out.ptr, static_cast<size_t>(tokens * s.hidden * 2)},
          {"topk_weights", layer.work.ptr + w.topk_weights, slots * 4},
          {"topk_ids", layer.work.ptr + w.topk_ids, slots * 4}};
      ops::TunedMoeOptions options;
      c.set(options, s, tokens);
      run_case(
          drv, fmt::format("{} {} T={}", shape_prefix, c.name, tokens), outputs,
          [&] { return ops::fused_moe(engine, s, layer.tensors(tokens, c.layout), options, stream); },
          tally);
    }
  }
}

// ---- inverse RoPE + FP8 quantization ----

void digest_inv_rope(runtime::Engine& engine, const runtime::Driver& drv, int64_t groups,
                     int64_t heads_per_group, const std::vector<int64_t>& token_counts,
                     CUstream stream, Tally& tally) {
  constexpr int64_t k_max_pos = 8192;
  const int64_t heads = groups * heads_per_group;
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  const int64_t max_padded = (max_tokens + 3) / 4 * 4;
  DeviceBuffer o(drv, max_tokens * heads * 512 * 2), positions(drv, max_tokens * 8),
      cos_sin(drv, k_max_pos * 64 * 4), out(drv, max_tokens * heads * 512),
      scales(drv, heads * 4 * max_padded * 4);
  const RandomTensor host_o = random_tensor(1, max_tokens * heads * 512, false, 1.0f, 1);
  o.upload(host_o.bytes.data(), host_o.bytes.size());
  std::vector<float> host_cos_sin(k_max_pos * 64);
  for (size_t i = 0; i < host_cos_sin.size(); ++i)
    host_cos_sin[i] = 0.5f + 0.5f * std::fabs(std::tanh(random_normal(2, i)));
  cos_sin.upload(host_cos_sin.data(), host_cos_sin.size() * 4);
  std::vector<int64_t> host_positions(max_tokens);
  std::mt19937 generator(3);
  for (int64_t& p : host_positions)
    p = generator() % k_max_pos;
  positions.upload(host_positions.data(), host_positions.size() * 8);
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = groups;
  options.heads_per_group = heads_per_group;
  for (int64_t tokens : token_counts) {
    const int64_t padded = (tokens + 3) / 4 * 4;
    const runtime::TensorRef o_ref{o.ptr, DType::bf16, {tokens, heads, 512}, {}};
    const runtime::TensorRef positions_ref{positions.ptr, DType::i64, {tokens}, {}};
    const runtime::TensorRef cos_sin_ref{cos_sin.ptr, DType::f32, {k_max_pos, 64}, {}};
    const runtime::TensorRef out_ref{
        out.ptr, DType::e4m3, {groups, tokens, heads_per_group * 512}, {}};
    const runtime::TensorRef scales_ref{
        scales.ptr, DType::f32, {groups, heads_per_group * 4, padded}, {}};
    run_case(drv,
             fmt::format("inv-rope g{}x{} bf16 default T={}", groups, heads_per_group, tokens),
             {{"out_fp8", out.ptr, static_cast<size_t>(groups * tokens * heads_per_group * 512)},
              {"out_scales", scales.ptr, static_cast<size_t>(heads * 4 * padded * 4)}},
             [&] {
               return ops::inv_rope_fp8_quant(engine, o_ref, positions_ref, cos_sin_ref, out_ref,
                                              scales_ref, options, stream);
             },
             tally);
  }
}

std::vector<int64_t> parse_list(const std::string& text, bool& ok) {
  std::vector<int64_t> values;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(text).split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    int64_t value = 0;
    if (part.trim().getAsInteger(10, value) || value < 1 || value > 65536) {
      ok = false;
      return {};
    }
    values.push_back(value);
  }
  ok = !values.empty();
  return values;
}

} // namespace

int run_digest(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--op", "--models", "--dtypes", "--tokens", "--cases"},
                   {"--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    std::printf(
        "usage: specjit-bench digest [--op moe|inv-rope|all] [--models a,b] [--dtypes fp8,bf16]\n"
        "                            [--tokens 1,4,...] [--cases table,packed,...]\n"
        "  runs the built-in ops on seeded random data and prints an XXH3-128 digest of every\n"
        "  output tensor, one line each; run two builds and diff their outputs. Defaults: both\n"
        "  ops, the three reference models, fp8 and bf16, T = 1 4 16 64 256 1024 4096 (moe) and\n"
        "  1 3 16 128 1024 4096 (inv-rope), every case. Exit 1 on an error or an unstable digest.\n");
    return 0;
  }
  const std::string op = flags.get("--op", "all");
  if (op != "all" && op != "moe" && op != "inv-rope") {
    llvm::errs() << "specjit-bench digest: --op must be moe, inv-rope or all, got '" << op << "'\n";
    return 2;
  }
  bool ok = true;
  std::vector<int64_t> moe_tokens = {1, 4, 16, 64, 256, 1024, 4096};
  std::vector<int64_t> rope_tokens = {1, 3, 16, 128, 1024, 4096};
  if (const std::string list = flags.get("--tokens", ""); !list.empty()) {
    moe_tokens = rope_tokens = parse_list(list, ok);
    if (!ok) {
      llvm::errs() << "specjit-bench digest: --tokens takes a comma-separated list of counts in "
                      "[1, 65536]\n";
      return 2;
    }
  }
  auto names = [&](const char* flag) {
    std::vector<std::string> out;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(flags.get(flag, "")).split(parts, ',', -1, false);
    for (llvm::StringRef part : parts)
      out.push_back(part.trim().str());
    return out;
  };
  const std::vector<std::string> model_names = names("--models"), case_names = names("--cases");
  std::vector<std::string> dtype_names = names("--dtypes");
  if (dtype_names.empty())
    dtype_names = {"fp8", "bf16"};
  for (const std::string& d : dtype_names)
    if (d != "fp8" && d != "bf16") {
      llvm::errs() << "specjit-bench digest: --dtypes takes fp8 and bf16, got '" << d << "'\n";
      return 2;
    }
  for (const std::string& c : case_names) {
    bool known = false;
    for (const MoeCase& mc : moe_cases())
      known |= c == mc.name;
    if (!known) {
      llvm::errs() << "specjit-bench digest: unknown case '" << c << "'\n";
      return 2;
    }
  }
  std::vector<const Model*> models;
  for (const Model& m : k_models) {
    const bool reference = m.peer.fixed_us[0] > 0; // the scaled shapes carry no peer figures
    if (model_names.empty() ? reference
                            : std::find(model_names.begin(), model_names.end(), m.name) !=
                                  model_names.end())
      models.push_back(&m);
  }
  if (models.size() < (model_names.empty() ? 1 : model_names.size())) {
    llvm::errs() << "specjit-bench digest: unknown model in --models\n";
    return 2;
  }
  if (!runtime::device_available()) {
    llvm::errs() << "specjit-bench digest: needs a CUDA device\n";
    return 1;
  }
  auto config = must(Config::from_environment(), "config");
  runtime::Engine engine(config);
  must(engine.make_context_current(), "context");
  const runtime::Driver& drv = *runtime::driver();
  CUstream stream = nullptr;
  must(drv.check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"), "stream");
  Tally tally;
  if (op != "inv-rope")
    for (const Model* model : models)
      for (const std::string& d : dtype_names)
        digest_moe(engine, drv, *model, d == "fp8" ? ops::MoeDType::fp8 : ops::MoeDType::bf16,
                   moe_tokens, case_names, stream, tally);
  if (op != "moe") {
    digest_inv_rope(engine, drv, 8, 16, rope_tokens, stream, tally);
    digest_inv_rope(engine, drv, 1, 4, rope_tokens, stream, tally);
  }
  drv.cuStreamDestroy(stream);
  std::fprintf(stderr, "specjit-bench digest: %d digests, %d failures\n", tally.lines,
               tally.failures);
  return tally.failures == 0 ? 0 : 1;
}

} // namespace specjit::bench
