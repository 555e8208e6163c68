// specjit-bench digest's fused MoE cases (digest.h).
#include "bench_data.h"
#include "digest.h"
#include "moe_harness.h"
#include "moe_routing.h"

#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"

#include <algorithm>

namespace specjit::bench {

namespace {

using runtime::DType;

// A model's layer on the device: random activations and weights as `specjit-bench moe` draws
// them (moe_host_data), the fixed routing's logits, both weight layouts.
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
    const MoeHostData host = moe_host_data(s, tokens);
    x.upload(host.x.bytes.data(), host.x.bytes.size());
    w13.upload(host.w13.bytes.data(), host.w13.bytes.size());
    w2.upload(host.w2.bytes.data(), host.w2.bytes.size());
    scales.upload(host.scales.data(), host.scales.size() * 4);
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
    t.w13 = {
        packed ? w13_packed.ptr : w13.ptr, dtype(), {s.experts, 2 * s.intermediate, s.hidden}, {}};
    t.w2 = {packed ? w2_packed.ptr : w2.ptr, dtype(), {s.experts, s.hidden, s.intermediate}, {}};
    t.a1_scale = {scales.ptr, DType::f32, {1}, {}};
    t.a2_scale = {scales.ptr + 4, DType::f32, {1}, {}};
    t.w13_scale = {scales.ptr + 8, DType::f32, {s.experts}, {}};
    t.w2_scale = {scales.ptr + 8 + 4 * s.experts, DType::f32, {s.experts}, {}};
    t.out = {out.ptr, DType::bf16, {tokens, s.hidden}, {}};
    t.workspace = {work.ptr,
                   DType::u8,
                   {static_cast<int64_t>(ops::moe_workspace_layout(s, tokens).bytes)},
                   {}};
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
  prepare_requests(engine, requests);
}

} // namespace

std::vector<std::string> moe_case_names() {
  std::vector<std::string> names;
  for (const MoeCase& c : moe_cases())
    names.push_back(c.name);
  return names;
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
        if (auto err = ops::moe_pack_weights(
                engine, t.w13, {layer.w13_packed.ptr, t.w13.dtype, t.w13.shape, {}}, stream))
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
          [&] {
            return ops::fused_moe(engine, s, layer.tensors(tokens, c.layout), options, stream);
          },
          tally);
    }
  }
}

} // namespace specjit::bench
