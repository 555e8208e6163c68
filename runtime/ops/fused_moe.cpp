#include "runtime/ops/fused_moe.h"

#include "runtime/ops/moe_detail.h"
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <fmt/format.h>
#include <llvm/ADT/DenseMap.h>

#include <algorithm>

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

// Weight rows of one GEMM: gate and up rows (GEMM1), or hidden rows (GEMM2).
int64_t gemm_rows(const MoeShape& s, int gemm) { return gemm == 1 ? 2 * s.intermediate : s.hidden; }

// CTAs of a wgmma GEMM's 1-D grid: token blocks rounded up to a multiple of k_grouped_blocks (every
// launch order's group divides it: group_blocks, kernels_src/moe/wgmma_pipeline.cuh, setup) x tile
// groups of `tiles` weight tiles x split_k CTAs per split-K cluster.
int64_t wgmma_ctas(int64_t blocks, int64_t rows, const GemmTile& tile) {
  return ceil_div(blocks, k_grouped_blocks) * k_grouped_blocks *
         (rows / tile.block_n / tile.tiles) * tile.split_k;
}
// The persistent schedules' grid: as many CTAs as the device holds at once, at most one per
// tile (dynamic) or per step (stream-K, whose CTAs also need the workspace's scratch:
// k_stream_k_max_ctas counters, two slots of 64 x block_m sums per MMA a CTA).
llvm::Expected<unsigned> persistent_ctas(runtime::Engine& engine, const runtime::Variant& variant,
                                         const runtime::LaunchConfig& launch, int gemm,
                                         int64_t block_m, int64_t blocks, int64_t rows,
                                         int64_t k_bytes, const GemmTile& tile) {
  thread_local llvm::DenseMap<const runtime::Variant*, unsigned> resident;
  auto it = resident.find(&variant);
  if (it == resident.end()) {
    auto ctas = engine.resident_ctas(variant, launch);
    if (!ctas)
      return ctas.takeError();
    it = resident.try_emplace(&variant, *ctas).first;
  }
  const int64_t tiles = blocks * (rows / tile.block_n);
  if (tile.dynamic()) // whole tiles, no scratch slots
    return static_cast<unsigned>(std::min<int64_t>(it->second, tiles));
  const int64_t slot_floats = 64 * block_m * (gemm == 1 ? 2 : 1); // GEMM1: gate and up MMAs
  return static_cast<unsigned>(
      std::min<int64_t>({it->second, int64_t{k_stream_k_max_ctas},
                         k_stream_k_slot_floats / (2 * slot_floats), tiles * (k_bytes / 128)}));
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

// Measured on the H200 with the weights packed (docs/moe.md, "Packed weights"), each GEMM
// alone against the same tile reading row-major weights by tensor map: bulk copies
// 2-5 % faster for the swap-AB tiles of decode; the f16-token GEMM1 and the normal orientation
// (8 pieces a stage, weights mostly from L2) up to 13 % slower, so they read the packed copy
// through a tensor map.
bool moe_detail::packed_bulk_reads(const GemmTile& tile) {
  return tile.swap_ab && !tile.f16_tokens;
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
    const int64_t ctas = wgmma_ctas(blocks, gemm_rows(s, gemm), tile);
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
  const CUdeviceptr w = t.workspace.data;
  const CUdeviceptr topk_weights = w + l.topk_weights, topk_ids = w + l.topk_ids,
                    sorted = w + l.sorted_ids, expert_ids = w + l.expert_ids,
                    npp = w + l.num_post_padded, inter = w + l.intermediate,
                    slot_out = w + l.slot_out, scratch = w + l.stream_k,
                    tokens_f16 = w + l.tokens_f16;
  const int n_tokens = static_cast<int>(tokens), top_k = static_cast<int>(s.top_k);

  if (options.stages & moe_stage_route)
    if (auto err = moe_route(engine, t.router_logits, {topk_weights, DType::f32, {tokens, s.top_k}, {}},
                             {topk_ids, DType::i32, {tokens, s.top_k}, {}}, options.renormalize,
                             stream))
      return err;
  if (options.stages & moe_stage_align)
    if (auto err = moe_align(engine, {topk_ids, DType::i32, {tokens, s.top_k}, {}}, s.experts,
                             config.block_m, {sorted, DType::i32, {l.max_padded}, {}},
                             {expert_ids, DType::i32, {ceil_div(l.max_padded, k_min_block_m)}, {}},
                             {npp, DType::i32, {1}, {}}, false, stream,
                             {scratch, DType::i32, {l.counter_ints}, {}}, moe_slot_order(config)))
      return err;
  const int handoff = handoff_target(s, tokens, config, options, blocks);
  const int group = group_blocks(s, tokens, config.block_m, handoff != 0, options.launch_order);
  for (int gemm = 1; gemm <= 2; ++gemm) {
    if (!(options.stages & (gemm == 1 ? moe_stage_gemm1 : moe_stage_gemm2)))
      continue;
    const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
    if (gemm == 1 && tile.f16_tokens) // the tokens in f16, once for all of GEMM1's CTAs
      if (auto err = launch_tokens_f16(engine, s, t.hidden.data, sorted, npp, tokens_f16, tokens,
                                       l.tokens_f16_rows, stream))
        return err;
    runtime::LaunchConfig launch;
    const int64_t rows = gemm_rows(s, gemm);
    if (tile.kernel == MoeGemmKernel::wgmma) {
      // Checked against k_max_grid_x above. A split-K cluster is split_k consecutive CTAs.
      launch.grid[0] = static_cast<unsigned>(wgmma_ctas(blocks, rows, tile));
      launch.cluster_x = static_cast<unsigned>(tile.split_k);
      // GEMM2 is a programmatic dependent of GEMM1: it streams weights while GEMM1 ends. It
      // reads the routing arrays at once, so only right after a GEMM1 of this call (whose CTAs
      // let it start after they have read them; run alone it would race the kernel before).
      // GEMM1 as a programmatic dependent of align measured no gain (Qwen3 T=1: 14.7 µs).
      launch.programmatic_serialization =
          options.programmatic_launch && gemm == 2 && (options.stages & moe_stage_gemm1);
    } else {
      launch.grid[0] = static_cast<unsigned>(rows / tile.block_n);
      launch.grid[1] = static_cast<unsigned>(blocks);
    }
    launch.block[0] = tile.threads(gemm);
    launch.shared_bytes = moe_gemm_shared_bytes(config.block_m, tile, s.dtype, gemm);
    launch.stream = stream;
    const int weights = weight_reads(tile, t.weight_layout, options.packed_reads);
    const auto values = gemm_values(s, gemm, config.block_m, tile, tokens, weights);
    const KernelIndex index = gemm_index(gemm, s.dtype, tile.kernel);
    llvm::Error err = llvm::Error::success();
    if (tile.kernel == MoeGemmKernel::wgmma) {
      // Weights through TMA: rows of K bytes per expert, boxes of 128 bytes x the tile's rows
      // (GEMM1: its gate half and its up half, loaded separately). Packed weights: by bulk copies
      // from their address (weights 1; the map goes unused) or through a rank-4 map (weights 2).
      const int64_t k_bytes = (gemm == 1 ? s.hidden : s.intermediate) * element_bytes(s.dtype);
      const uint32_t box_rows = static_cast<uint32_t>(gemm == 1 ? tile.block_n / 2 : tile.block_n);
      const CUdeviceptr weight_data = gemm == 1 ? t.w13.data : t.w2.data;
      auto map = weights == 2
                     ? runtime::tensor_map_packed_weights(weight_data, s.experts * rows, k_bytes,
                                                          k_moe_piece_rows, box_rows)
                     : runtime::tensor_map_u8_3d(weight_data,
                                                 {static_cast<uint64_t>(k_bytes),
                                                  static_cast<uint64_t>(rows),
                                                  static_cast<uint64_t>(s.experts)},
                                                 {128, box_rows, 1});
      const CUdeviceptr bulk_from = weights == 1 ? weight_data : 0;
      if (!map)
        return map.takeError();
      // Looked up once: the persistent schedules size their grid from it.
      auto variant = get_variant(engine, index, values);
      if (!variant)
        return variant.takeError();
      if (tile.persistent()) {
        auto ctas = persistent_ctas(engine, **variant, launch, gemm, config.block_m, blocks, rows,
                                    k_bytes, tile);
        if (!ctas)
          return ctas.takeError();
        launch.grid[0] = *ctas;
      }
      if (gemm == 1) {
        // The sorted f16-token tiles' tokens: the f16 copy, one box of block_m rows per K half
        // and stage. The other tiles read no map there, so they get the weights' again; the
        // f16-token tiles in token order gather from the copy instead of hidden.
        const bool sorted_copy = tile.f16_tokens && f16_tokens_sorted(s);
        CUtensorMap tokens_map = *map;
        if (sorted_copy) {
          auto f16_map = runtime::tensor_map_u8_3d(
              tokens_f16,
              {static_cast<uint64_t>(2 * s.hidden), static_cast<uint64_t>(l.tokens_f16_rows), 1},
              {128, static_cast<uint32_t>(config.block_m), 1});
          if (!f16_map)
            return f16_map.takeError();
          tokens_map = *f16_map;
        }
        err = engine.launch(**variant, launch, *map, tokens_map,
                            tile.f16_tokens && !sorted_copy ? tokens_f16 : t.hidden.data, sorted,
                            expert_ids, npp, t.a1_scale.data, t.w13_scale.data, t.a2_scale.data,
                            inter, scratch, handoff > 0 ? 1 : 0, group, n_tokens, top_k, bulk_from);
      } else {
        // GEMM2's token rows: the intermediate in sorted order, one box of block_m rows.
        auto inter_map = runtime::tensor_map_u8_3d(
            inter, {static_cast<uint64_t>(k_bytes), static_cast<uint64_t>(l.max_padded), 1},
            {128, static_cast<uint32_t>(config.block_m), 1});
        if (!inter_map)
          return inter_map.takeError();
        err = engine.launch(**variant, launch, *map, *inter_map, sorted, expert_ids, npp,
                            t.a2_scale.data, t.w2_scale.data, topk_weights, slot_out, scratch,
                            handoff, group, n_tokens, top_k, bulk_from);
      }
    } else {
      err = gemm == 1 ? launch_variant(engine, index, values, launch, t.hidden.data, t.w13.data,
                                       sorted, expert_ids, npp, t.a1_scale.data,
                                       t.w13_scale.data, t.a2_scale.data, inter, n_tokens, top_k)
                      : launch_variant(engine, index, values, launch, inter, t.w2.data, sorted,
                                       expert_ids, npp, t.a2_scale.data, t.w2_scale.data,
                                       topk_weights, slot_out, n_tokens, top_k);
    }
    if (err)
      return err;
  }
  if (options.stages & moe_stage_reduce) {
    // 8 values a thread.
    const runtime::LaunchConfig launch = grid_stride_launch(tokens * s.hidden / 8, 16, stream);
    if (auto err = launch_variant(engine, k_reduce, {s.top_k, tokens}, launch, slot_out,
                                  t.out.data, n_tokens, static_cast<int>(s.hidden)))
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
      add(gemm_index(gemm, s.dtype, tile.kernel),
          gemm_values(s, gemm, config.block_m, tile, count,
                      weight_reads(tile, weights, options.packed_reads)));
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
