#include "ops/moe/plan.h"

#include "support/error.h"

#include <fmt/format.h>

namespace specjit::ops::moe_detail {

KernelIndex PlannedGemm::index() const {
  return kernel == MoeGemmKernel::wgmma
             ? gemm_index(wgmma.gemm, wgmma.dtype, kernel, wgmma.e4m3, wgmma.whole_k)
             : gemm_index(mma.gemm, mma.dtype, kernel);
}

std::vector<int64_t> PlannedGemm::values(int64_t num_tokens) const {
  return kernel == MoeGemmKernel::wgmma ? wgmma.values(num_tokens) : mma.values(num_tokens);
}

std::vector<runtime::VariantRequest> MoePlan::variants() const {
  static const std::vector<runtime::KernelDef> defs = moe_kernels();
  std::vector<runtime::VariantRequest> out;
  auto add = [&](KernelIndex index, const std::vector<int64_t>& values) {
    out.push_back({defs[index], values});
  };
  if (runs(moe_stage_route))
    add(k_route, route);
  if (runs(moe_stage_align))
    add(k_align, align);
  if (runs(moe_stage_gemm1) && !tokens_f16.empty())
    add(k_tokens_f16, tokens_f16);
  if (runs(moe_stage_gemm1))
    add(gemm1.index(), gemm1.values(tokens));
  if (runs(moe_stage_gemm2))
    add(gemm2.index(), gemm2.values(tokens));
  if (runs(moe_stage_reduce))
    add(k_reduce, reduce);
  return out;
}

// GEMM2's block hand-off target (MoeDependence in kernels_src/moe/wgmma_produce.cuh): the count
// a token block's counter reaches once GEMM1 has written it, i.e. GEMM1's tiles per block (of
// block_n / 2 output columns) times the warps that run each tile's epilogue (swap-AB: the one
// warpgroup left after the K split; normal: every warpgroup, each with its own token rows).
// 0, GEMM2 waiting for the whole of GEMM1, unless both GEMMs are wgmma and run in this call
// (GEMM2 zeroes the counters GEMM1 counted; align zeroes them too), every block has a counter,
// and not both GEMMs are stream-K (they share the scratch slots, so they must not overlap); and
// options.handoff (automatic: FP8 with 32 tokens an expert or more).
int handoff_target(const MoeShape& s, int64_t tokens, const MoeTileConfig& config,
                   const MoeTuning& options, int64_t blocks) {
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

int group_blocks(const MoeShape& s, int64_t tokens, int block_m, bool handoff,
                 MoeLaunchOrder order) {
  if (order != MoeLaunchOrder::automatic)
    return order == MoeLaunchOrder::block_major ? 1 : k_grouped_blocks;
  // With at most 8 experts and one block each, groups of 8 blocks interleave every block of the
  // call over the whole grid, so none is complete before GEMM1's last wave, which only matters
  // to a GEMM2 that takes blocks as they complete. Without the hand-off (Mixtral T <= 64)
  // block-major measured no faster, and slower for the routings that put more than a block on
  // one expert (Mixtral T = 16, blocks of 8: 385 against 366 µs at worst, 0.6 % on average over
  // 48 routings). Where block-major measured faster and slower:
  // docs/moe.md, "Tuning knobs".
  return handoff && s.dtype == MoeDType::fp8 && s.experts <= 8 &&
                 tokens * s.top_k <= s.experts * int64_t{block_m}
             ? 1
             : k_grouped_blocks;
}

namespace {

PlannedGemm plan_gemm(const MoeShape& s, int gemm, const MoeTileConfig& config,
                      MoeWeightLayout layout, MoePackedReads reads) {
  const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
  PlannedGemm planned;
  planned.kernel = tile.kernel;
  if (tile.kernel == MoeGemmKernel::wgmma)
    planned.wgmma = WgmmaGemm::of(s, gemm, config.block_m, tile, layout, reads);
  else
    planned.mma = MmaGemm::of(s, gemm, config.block_m, tile);
  return planned;
}

// What the configuration needs of the grids at this count, and of packed weights.
llvm::Error check_grids(const MoePlan& p) {
  const int64_t slots = p.tokens * p.shape.top_k;
  // mma.sync GEMMs put the token blocks on grid y (at most 65535); the wgmma GEMMs' 1-D grid
  // (x, up to 2^31 - 1) holds every (block, tile group, split) triple.
  const bool mma_gemm =
      p.gemm1.kernel == MoeGemmKernel::mma || p.gemm2.kernel == MoeGemmKernel::mma;
  if (mma_gemm && p.blocks > k_max_grid_y)
    return make_error(Errc::invalid_argument,
                      "{}: {} slots need {} blocks of {} (at most {} with mma.sync tiles)",
                      k_op.str(), slots, p.blocks, p.config.block_m, k_max_grid_y);
  for (int gemm = 1; gemm <= 2; ++gemm) {
    const GemmTile& tile = gemm == 1 ? p.config.gemm1 : p.config.gemm2;
    const PlannedGemm& g = p.gemm(gemm);
    if (g.kernel == MoeGemmKernel::wgmma && g.wgmma.fixed_ctas(p.blocks) > k_max_grid_x)
      return make_error(Errc::invalid_argument, "{}: {} slots need {} CTAs of {} (at most {})",
                        k_op.str(), slots, g.wgmma.fixed_ctas(p.blocks), tile.describe(),
                        k_max_grid_x);
    if (p.layout == MoeWeightLayout::packed && !moe_tile_reads_packed(gemm, tile))
      return make_error(Errc::invalid_argument,
                        "{}: packed weights are read by wgmma tiles whose weight rows a stage "
                        "are a multiple of {}; GEMM{}'s tile is {}",
                        k_op.str(), k_moe_piece_rows, gemm, tile.describe());
  }
  return llvm::Error::success();
}

// The tiles of `config` as exact accumulation runs them. Every FP8 GEMM1 tile converts to f16,
// which keeps an f16 copy of its B operand in shared memory: a tile tuned for e4m3 MMAs may then
// not fit, and runs with the most stages that do. GEMM2 promotes once a stage, as the exact
// path's bound was measured; its 256-wide tiles only fit unpromoted, so they run 128 wide.
void exact_tiles(const MoeShape& s, const Arch& arch, MoeTileConfig& config) {
  GemmTile& g1 = config.gemm1;
  g1.e4m3 = g1.whole_k = g1.sorted_tokens = false;
  while (g1.stages > 2 &&
         moe_gemm_shared_total(config.block_m, g1, s.dtype, 1) > moe_shared_limit(arch))
    --g1.stages;
  GemmTile& g2 = config.gemm2;
  if (g2.whole_k && !g2.swap_ab && g2.block_n == 256)
    g2.block_n = 128;
  g2.whole_k = false;
}

} // namespace

llvm::Expected<MoePlan> plan_fused_moe(const MoeShape& s, int64_t tokens,
                                       const runtime::DeviceFacts& target,
                                       const TunedMoeOptions& options, MoeWeightLayout layout) {
  const Arch& arch = target.arch;
  if (auto err = check_moe_shape(s))
    return err;
  MoePlan p;
  p.shape = s;
  p.tokens = tokens;
  p.stages = options.stages;
  p.layout = layout;
  p.multiprocessors = target.multiprocessors;
  if (options.config) {
    p.config = *options.config;
    if (auto err = check_moe_config(s, p.config, arch))
      return err;
  } else {
    auto resolved = resolve_moe_config(s, tokens, target, options.table, layout);
    if (!resolved)
      return resolved.takeError();
    p.config = resolved->config;
  }
  if (options.accumulation == MoeAccumulation::exact) {
    exact_tiles(s, arch, p.config);
    if (auto err = check_moe_config(s, p.config, arch))
      return err;
  }
  p.blocks =
      ceil_div(moe_max_padded(tokens * s.top_k, s.experts, p.config.block_m), p.config.block_m);
  p.gemm1 = plan_gemm(s, 1, p.config, layout, options.packed_reads);
  p.gemm2 = plan_gemm(s, 2, p.config, layout, options.packed_reads);
  if (auto err = check_grids(p))
    return err;
  p.slot_order = moe_slot_order(p.config);
  p.handoff = handoff_target(s, tokens, p.config, options, p.blocks);
  p.group_blocks = group_blocks(s, tokens, p.config.block_m, p.handoff != 0, options.launch_order);
  // GEMM2 streams its weights while GEMM1 ends. It reads the routing arrays at once, so only
  // right after a GEMM1 of this call (whose CTAs let it start after they have read them; run
  // alone it would race the kernel before).
  p.programmatic = options.programmatic_launch && p.runs(moe_stage_gemm1) &&
                   p.gemm2.kernel == MoeGemmKernel::wgmma;
  p.route = {s.experts, s.top_k, options.renormalize ? 1 : 0, tokens};
  p.align = align_values(s.experts, p.config.block_m, p.slot_order, tokens);
  if (p.config.gemm1.f16_tokens || p.config.gemm1.sorted_tokens)
    p.tokens_f16 = tokens_f16_values(s, tokens, p.config.gemm1.sorted_tokens);
  p.reduce = {s.top_k, tokens};
  return p;
}

} // namespace specjit::ops::moe_detail
