#include "ops/moe/fused_moe.h"

#include "ops/moe/plan.h"

#include "support/error.h"

#include <algorithm>
#include <fmt/format.h>

#include <set>

namespace specjit::ops {

using namespace moe_detail;
using runtime::DType;
using runtime::KernelDef;
using runtime::TensorRef;

namespace {

// The options with every knob at its default.
TunedMoeOptions tuned(const FusedMoeOptions& options) {
  TunedMoeOptions out;
  out.options() = options;
  return out;
}

// router_logits is only read by the route stage: callers that route themselves (the C ABI's
// precomputed top-k) run the later stages without it.
llvm::Error validate(const MoeShape& s, const FusedMoeTensors& t, unsigned stages) {
  if (auto err = check_moe_shape(s))
    return err;
  const DType dtype = tensor_dtype(s.dtype);
  if (auto err = expect("hidden", t.hidden, dtype, {-1, s.hidden}, 16))
    return err;
  const int64_t tokens = t.hidden.shape[0];
  if (tokens * s.top_k >= (int64_t{1} << 31) / 2)
    return make_error(Errc::invalid_argument, "{}: {} tokens x top-{} is too many slots",
                      k_op.str(), tokens, s.top_k);
  if (stages & moe_stage_route)
    if (auto err = expect("router_logits", t.router_logits, DType::f32, {tokens, s.experts}, 4))
      return err;
  if (auto err = expect("w13", t.w13, dtype, {s.experts, 2 * s.intermediate, s.hidden}, 16))
    return err;
  if (auto err = expect("w2", t.w2, dtype, {s.experts, s.hidden, s.intermediate}, 16))
    return err;
  if (s.dtype == MoeDType::fp8) {
    if (auto err = expect("a1_scale", t.a1_scale, DType::f32, {1}, 4))
      return err;
    if (auto err = expect("w13_scale", t.w13_scale, DType::f32, {s.experts}, 4))
      return err;
    if (auto err = expect("a2_scale", t.a2_scale, DType::f32, {1}, 4))
      return err;
    if (auto err = expect("w2_scale", t.w2_scale, DType::f32, {s.experts}, 4))
      return err;
  }
  if (auto err = expect("out", t.out, DType::bf16, {tokens, s.hidden}, 16))
    return err;
  return expect_capacity("workspace", t.workspace, DType::u8,
                         static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes), 256);
}

// hidden e4m3 [tokens, H] -> f16 at `out` (kernels_src/moe/tokens_f16.cu), 16 values a thread:
// in token order, or in the sorted order of the slots (f16_tokens_sorted; up to `rows` rows).
llvm::Error launch_tokens_f16(runtime::Engine& engine, const MoePlan& p, const MoeBuffers& b,
                              CUstream stream) {
  const MoeShape& s = p.shape;
  const runtime::LaunchConfig launch =
      grid_stride_launch(b.tokens_f16_rows * s.hidden / 16, 8, p.multiprocessors, stream);
  return launch_variant(engine, k_tokens_f16, p.tokens_f16, launch, b.hidden, b.sorted_ids,
                        b.num_post_padded, b.tokens_f16, static_cast<int>(p.tokens),
                        static_cast<int>(s.top_k), static_cast<int>(s.hidden));
}

llvm::Error launch_gemm(runtime::Engine& engine, const MoePlan& p, int gemm, const MoeBuffers& b,
                        CUstream stream) {
  const PlannedGemm& g = p.gemm(gemm);
  if (g.kernel == MoeGemmKernel::mma)
    return launch_mma_gemm(engine, p.shape, g.mma, b, p.tokens, p.blocks, stream);
  WgmmaLaunch how;
  how.blocks = p.blocks;
  how.handoff = gemm == 1 ? (p.handoff > 0 ? 1 : 0) : p.handoff;
  how.group_blocks = p.group_blocks;
  // GEMM1 as a programmatic dependent of align measured no gain (Qwen3 T=1: 14.7 µs).
  how.programmatic = gemm == 2 && p.programmatic;
  return launch_wgmma_gemm(engine, p.shape, g.wgmma, b, p.tokens, how, stream);
}

// Launches what the plan names, stage by stage, over the call's buffers.
llvm::Error launch(runtime::Engine& engine, const MoePlan& p, const MoeBuffers& b,
                   CUstream stream) {
  const MoeShape& s = p.shape;
  if (p.runs(moe_stage_route))
    if (auto err = launch_route(engine, p.route, b.router_logits, b.topk_weights, b.topk_ids,
                                p.tokens, stream))
      return err;
  if (p.runs(moe_stage_align))
    if (auto err =
            launch_align(engine, p.align, b.topk_ids, b.sorted_ids, b.expert_ids, b.num_post_padded,
                         b.scratch, b.counter_ints, p.tokens, s.top_k, stream))
      return err;
  if (p.runs(moe_stage_gemm1) && !p.tokens_f16.empty()) // once for all of GEMM1's CTAs
    if (auto err = launch_tokens_f16(engine, p, b, stream))
      return err;
  for (int gemm = 1; gemm <= 2; ++gemm)
    if (p.runs(gemm == 1 ? moe_stage_gemm1 : moe_stage_gemm2))
      if (auto err = launch_gemm(engine, p, gemm, b, stream))
        return err;
  if (!p.runs(moe_stage_reduce))
    return llvm::Error::success();
  // 8 values a thread.
  const runtime::LaunchConfig reduce =
      grid_stride_launch(p.tokens * s.hidden / 8, 16, p.multiprocessors, stream);
  return launch_variant(engine, k_reduce, p.reduce, reduce, b.slot_out, b.out,
                        static_cast<int>(p.tokens), static_cast<int>(s.hidden));
}

} // namespace

runtime::LaunchConfig moe_detail::grid_stride_launch(int64_t items, int64_t per_sm,
                                                     int multiprocessors, CUstream stream) {
  runtime::LaunchConfig launch;
  launch.grid[0] =
      static_cast<unsigned>(std::min<int64_t>(ceil_div(items, 256), multiprocessors * per_sm));
  launch.block[0] = 256;
  launch.stream = stream;
  return launch;
}

llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& s, const FusedMoeTensors& t,
                      const FusedMoeOptions& options, CUstream stream) {
  return fused_moe(engine, s, t, tuned(options), stream);
}

llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& s, const FusedMoeTensors& t,
                      const TunedMoeOptions& options, CUstream stream) {
  if (auto err = validate(s, t, options.stages))
    return err;
  const int64_t tokens = t.hidden.shape[0];
  if (tokens == 0)
    return llvm::Error::success();
  auto plan = plan_fused_moe(s, tokens, engine.device_facts(), options, t.weight_layout);
  if (!plan)
    return plan.takeError();
  return launch(engine, *plan, MoeBuffers::of(t, moe_workspace_layout(s, tokens)), stream);
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const FusedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  return fused_moe_variants(s, tuned(options), runtime::DeviceFacts::for_target(arch), token_counts,
                            weights);
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const FusedMoeOptions& options,
                   const runtime::DeviceFacts& target, llvm::ArrayRef<int64_t> token_counts,
                   MoeWeightLayout weights) {
  return fused_moe_variants(s, tuned(options), target, token_counts, weights);
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const TunedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  return fused_moe_variants(s, options, runtime::DeviceFacts::for_target(arch), token_counts,
                            weights);
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const TunedMoeOptions& options,
                   const runtime::DeviceFacts& target, llvm::ArrayRef<int64_t> token_counts,
                   MoeWeightLayout weights) {
  if (auto err = check_moe_shape(s))
    return err;
  std::vector<int64_t> counts(token_counts.begin(), token_counts.end());
  if (counts.empty()) { // every bucket: its upper bound is one of its counts
    auto all = resolve_moe_config(s, 1, target, options.table, weights);
    if (!all)
      return all.takeError();
    counts = all->bounds;
  }
  // Every stage, whatever the options run: a serving call runs them all.
  TunedMoeOptions every = options;
  every.stages = moe_stage_all;
  std::vector<runtime::VariantRequest> out;
  std::set<std::string> seen;
  auto add = [&](runtime::VariantRequest request) {
    std::string key = request.def.id;
    for (size_t p = 0; p < request.values.size(); ++p)
      key += fmt::format("|{}", request.def.params[p].policy.kind == runtime::PolicyKind::dynamic
                                    ? 0
                                    : request.values[p]);
    if (seen.insert(key).second)
      out.push_back(std::move(request));
  };
  for (int64_t count : counts) {
    auto plan = plan_fused_moe(s, count, target, every, weights);
    if (!plan)
      return plan.takeError();
    for (runtime::VariantRequest& request : plan->variants())
      add(std::move(request));
    // A caller may pack the weights for the wgmma GEMMs at load (one variant, any shape).
    if (plan->gemm1.kernel == MoeGemmKernel::wgmma && plan->gemm2.kernel == MoeGemmKernel::wgmma)
      add({moe_kernels()[k_pack_weights], {s.experts * 2 * s.intermediate}});
  }
  return out;
}

llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const FusedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  return prepare_fused_moe(engine, shape, tuned(options), token_counts, weights);
}

llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const TunedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  auto requests = fused_moe_variants(shape, options, engine.device_facts(), token_counts, weights);
  if (!requests)
    return requests.takeError();
  std::vector<const runtime::Variant*> variants;
  for (const runtime::VariantRequest& request : *requests) {
    auto id = engine.add_kernel(request.def);
    if (!id)
      return id.takeError();
    auto variant = engine.prepare(*id, request.values);
    if (!variant)
      return variant.takeError();
    variants.push_back(*variant);
  }
  return variants;
}

} // namespace specjit::ops
