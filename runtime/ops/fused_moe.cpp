#include "runtime/ops/fused_moe.h"

#include "runtime/ops/moe_detail.h"
#include "runtime/ops/moe_gemm_mma.h"
#include "runtime/ops/moe_gemm_wgmma.h"

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
llvm::Error launch_tokens_f16(runtime::Engine& engine, const MoeShape& s, CUdeviceptr hidden,
                              CUdeviceptr sorted_ids, CUdeviceptr npp, CUdeviceptr out,
                              int64_t tokens, int64_t rows, CUstream stream) {
  const runtime::LaunchConfig launch = grid_stride_launch(rows * s.hidden / 16, 8, stream);
  return launch_variant(engine, k_tokens_f16, tokens_f16_values(s, tokens), launch, hidden,
                        sorted_ids, npp, out, static_cast<int>(tokens), static_cast<int>(s.top_k),
                        static_cast<int>(s.hidden));
}

} // namespace

// GEMM2's block hand-off target (MoeDependence in kernels_src/moe/wgmma_pipeline.cuh): the count
// a token block's counter reaches once GEMM1 has written it, i.e. GEMM1's tiles per block (of
// block_n / 2 output columns) times the warps that run each tile's epilogue (swap-AB: the one
// warpgroup left after the K split; normal: every warpgroup, each with its own token rows).
// 0, GEMM2 waiting for the whole of GEMM1, unless both GEMMs are wgmma and run in this call
// (GEMM2 zeroes the counters GEMM1 counted; align zeroes them too), every block has a counter,
// and not both GEMMs are stream-K (they share the scratch slots, so they must not overlap); and
// options.handoff (automatic: FP8 with 32 tokens an expert or more).
int moe_detail::handoff_target(const MoeShape& s, int64_t tokens, const MoeTileConfig& config,
                               const FusedMoeOptions& options, int64_t blocks) {
  const unsigned gemms = moe_stage_gemm1 | moe_stage_gemm2;
  const bool wanted = options.handoff == MoeHandoff::always ||
                      (options.handoff == MoeHandoff::automatic && s.dtype == MoeDType::fp8 &&
                       tokens * s.top_k >= 32 * s.experts);
  if (!wanted || (options.stages & gemms) != gemms || config.gemm1.kernel != MoeGemmKernel::wgmma ||
      config.gemm2.kernel != MoeGemmKernel::wgmma || blocks > k_handoff_blocks ||
      (config.gemm1.stream_k() && config.gemm2.stream_k()))
    return 0;
  const GemmTile& g1 = config.gemm1;
  const int64_t tiles = s.intermediate / (g1.block_n / 2);
  // Swap-AB's warpgroups split K, but with f16 tokens the output columns.
  const int64_t epilogue_warps = g1.swap_ab && !g1.f16_tokens ? 4 : 4 * g1.warpgroups;
  return static_cast<int>(tiles * epilogue_warps);
}

runtime::LaunchConfig moe_detail::grid_stride_launch(int64_t items, int64_t per_sm,
                                                     CUstream stream) {
  runtime::LaunchConfig launch;
  launch.grid[0] = static_cast<unsigned>(std::min<int64_t>(ceil_div(items, 256), 132 * per_sm));
  launch.block[0] = 256;
  launch.stream = stream;
  return launch;
}

int moe_detail::group_blocks(const MoeShape& s, int64_t tokens, int block_m, bool handoff,
                             MoeLaunchOrder order) {
  if (order != MoeLaunchOrder::automatic)
    return order == MoeLaunchOrder::block_major ? 1 : k_grouped_blocks;
  // With at most 8 experts and one block each, groups of 8 blocks interleave every block of the
  // call over the whole grid, so none is complete before GEMM1's last wave, which only matters
  // to a GEMM2 that takes blocks as they complete. Without the hand-off (Mixtral T <= 64)
  // block-major measured no faster, and slower for the routings that put more than a block on
  // one expert (Mixtral T = 16, blocks of 8: 385 against 366 µs at worst, 0.6 % on average over
  // 48 routings). Where block-major measured faster and slower:
  // FusedMoeOptions::launch_order.
  return handoff && s.dtype == MoeDType::fp8 && s.experts <= 8 &&
                 tokens * s.top_k <= s.experts * int64_t{block_m}
             ? 1
             : k_grouped_blocks;
}

llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& s, const FusedMoeTensors& t,
                      const FusedMoeOptions& options, CUstream stream) {
  if (auto err = validate(s, t, options.stages))
    return err;
  const int64_t tokens = t.hidden.shape[0];
  if (tokens == 0)
    return llvm::Error::success();
  MoeTileConfig config;
  if (options.config) {
    config = *options.config;
    if (auto err = check_moe_config(s, config, engine.arch()))
      return err;
  } else {
    auto resolved = resolve_moe_config(s, tokens, engine.arch(), options.table, t.weight_layout);
    if (!resolved)
      return resolved.takeError();
    config = resolved->config;
  }
  const int64_t slots = tokens * s.top_k;
  const int64_t blocks = ceil_div(moe_max_padded(slots, s.experts, config.block_m), config.block_m);
  // mma.sync GEMMs put the token blocks on grid y (at most 65535); the wgmma GEMMs' 1-D grid
  // (x, up to 2^31 - 1) holds every (block, tile group, split) triple.
  const bool mma_gemm = config.gemm1.kernel == MoeGemmKernel::mma ||
                        config.gemm2.kernel == MoeGemmKernel::mma;
  if (mma_gemm && blocks > k_max_grid_y)
    return make_error(Errc::invalid_argument,
                      "{}: {} slots need {} blocks of {} (at most {} with mma.sync tiles)",
                      k_op.str(), slots, blocks, config.block_m, k_max_grid_y);
  const bool packed = t.weight_layout == MoeWeightLayout::packed;
  for (int gemm = 1; gemm <= 2; ++gemm) {
    const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
    const int64_t ctas =
        WgmmaGemm::of(s, gemm, config.block_m, tile, t.weight_layout, options.packed_reads)
            .fixed_ctas(blocks);
    if (tile.kernel == MoeGemmKernel::wgmma && ctas > k_max_grid_x)
      return make_error(Errc::invalid_argument, "{}: {} slots need {} CTAs of {} (at most {})",
                        k_op.str(), slots, ctas, tile.describe(), k_max_grid_x);
    if (packed && !moe_tile_reads_packed(gemm, tile))
      return make_error(Errc::invalid_argument,
                        "{}: packed weights are read by wgmma tiles whose weight rows a stage "
                        "are a multiple of {}; GEMM{}'s tile is {}",
                        k_op.str(), k_moe_piece_rows, gemm, tile.describe());
  }

  const MoeWorkspaceLayout l = moe_workspace_layout(s, tokens);
  const MoeBuffers b = MoeBuffers::of(t, l);
  if (options.stages & moe_stage_route)
    if (auto err =
            moe_route(engine, t.router_logits, {b.topk_weights, DType::f32, {tokens, s.top_k}, {}},
                      {b.topk_ids, DType::i32, {tokens, s.top_k}, {}}, options.renormalize, stream))
      return err;
  if (options.stages & moe_stage_align)
    if (auto err =
            moe_align(engine, {b.topk_ids, DType::i32, {tokens, s.top_k}, {}}, s.experts,
                      config.block_m, {b.sorted_ids, DType::i32, {l.max_padded}, {}},
                      {b.expert_ids, DType::i32, {ceil_div(l.max_padded, k_min_block_m)}, {}},
                      {b.num_post_padded, DType::i32, {1}, {}}, false, stream,
                      {b.scratch, DType::i32, {l.counter_ints}, {}}, moe_slot_order(config)))
      return err;
  const int handoff = handoff_target(s, tokens, config, options, blocks);
  const int group = group_blocks(s, tokens, config.block_m, handoff != 0, options.launch_order);
  for (int gemm = 1; gemm <= 2; ++gemm) {
    if (!(options.stages & (gemm == 1 ? moe_stage_gemm1 : moe_stage_gemm2)))
      continue;
    const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
    if (gemm == 1 && tile.f16_tokens) // the tokens in f16, once for all of GEMM1's CTAs
      if (auto err = launch_tokens_f16(engine, s, b.hidden, b.sorted_ids, b.num_post_padded,
                                       b.tokens_f16, tokens, l.tokens_f16_rows, stream))
        return err;
    llvm::Error err = llvm::Error::success();
    if (tile.kernel == MoeGemmKernel::wgmma) {
      WgmmaLaunch how;
      how.blocks = blocks;
      how.handoff = gemm == 1 ? (handoff > 0 ? 1 : 0) : handoff;
      how.group_blocks = group;
      // GEMM2 is a programmatic dependent of GEMM1: it streams weights while GEMM1 ends. It
      // reads the routing arrays at once, so only right after a GEMM1 of this call (whose CTAs
      // let it start after they have read them; run alone it would race the kernel before).
      // GEMM1 as a programmatic dependent of align measured no gain (Qwen3 T=1: 14.7 µs).
      how.programmatic =
          options.programmatic_launch && gemm == 2 && (options.stages & moe_stage_gemm1);
      err = launch_wgmma_gemm(
          engine, s,
          WgmmaGemm::of(s, gemm, config.block_m, tile, t.weight_layout, options.packed_reads), b,
          tokens, how, stream);
    } else {
      err = launch_mma_gemm(engine, s, MmaGemm::of(s, gemm, config.block_m, tile), b, tokens,
                            blocks, stream);
    }
    if (err)
      return err;
  }
  if (options.stages & moe_stage_reduce) {
    // 8 values a thread.
    const runtime::LaunchConfig launch = grid_stride_launch(tokens * s.hidden / 8, 16, stream);
    if (auto err = launch_variant(engine, k_reduce, {s.top_k, tokens}, launch, b.slot_out,
                                  t.out.data, static_cast<int>(tokens), static_cast<int>(s.hidden)))
      return err;
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const FusedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  if (auto err = check_moe_shape(s))
    return err;
  auto all = resolve_moe_config(s, 1, arch, options.table, weights);
  if (!all)
    return all.takeError();
  std::vector<int64_t> counts(token_counts.begin(), token_counts.end());
  if (counts.empty())
    counts = all->bounds;
  std::vector<runtime::VariantRequest> out;
  std::set<std::string> seen;
  const std::vector<KernelDef> defs = moe_kernels();
  auto add = [&](KernelIndex index, std::vector<int64_t> values) {
    std::string key = defs[index].id;
    for (size_t p = 0; p < values.size(); ++p)
      key += fmt::format(
          "|{}", defs[index].params[p].policy.kind == runtime::PolicyKind::dynamic ? 0 : values[p]);
    if (seen.insert(key).second)
      out.push_back({defs[index], std::move(values)});
  };
  for (int64_t count : counts) {
    MoeTileConfig config;
    if (options.config) {
      config = *options.config;
    } else {
      auto resolved = resolve_moe_config(s, count, arch, options.table, weights);
      if (!resolved)
        return resolved.takeError();
      config = resolved->config;
    }
    add(k_route, {s.experts, s.top_k, options.renormalize ? 1 : 0, count});
    add(k_align, align_values(s.experts, config.block_m, moe_slot_order(config), count));
    if (config.gemm1.f16_tokens)
      add(k_tokens_f16, tokens_f16_values(s, count));
    for (int gemm = 1; gemm <= 2; ++gemm) {
      const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
      if (tile.kernel == MoeGemmKernel::wgmma)
        add(gemm_index(gemm, s.dtype, tile.kernel),
            WgmmaGemm::of(s, gemm, config.block_m, tile, weights, options.packed_reads)
                .values(count));
      else
        add(gemm_index(gemm, s.dtype, tile.kernel),
            MmaGemm::of(s, gemm, config.block_m, tile).values(count));
    }
    add(k_reduce, {s.top_k, count});
    // A caller may pack the weights for the wgmma GEMMs at load (one variant, any shape).
    if (config.gemm1.kernel == MoeGemmKernel::wgmma && config.gemm2.kernel == MoeGemmKernel::wgmma)
      add(k_pack_weights, {s.experts * 2 * s.intermediate});
  }
  return out;
}

llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const FusedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts, MoeWeightLayout weights) {
  auto requests = fused_moe_variants(shape, options, engine.arch(), token_counts, weights);
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
