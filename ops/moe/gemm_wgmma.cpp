#include "ops/moe/gemm_wgmma.h"

#include "kernels_src/moe/dynamic_order.h"
#include "ops/common/kernel_defs.h"
#include "runtime/tensor_map.h"

#include <algorithm>
#include <cstring>

namespace specjit::ops::moe_detail {

namespace {

// The enumerators' names, in value order, as kernels_src/moe/gemm_args.h declares them; the
// name expressions spell them, so a name that drifted fails every compile of the kernel.
const std::vector<std::string>& orientation_names() {
  static const std::vector<std::string> names = {"normal", "swap_ab", "swap_ab_f16_tokens",
                                                 "swap_ab_f16_sorted", "normal_sorted"};
  return names;
}
const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"fixed", "stream_k", "dynamic"};
  return names;
}
const std::vector<std::string>& weight_read_names() {
  static const std::vector<std::string> names = {"row_major_map", "packed_bulk", "packed_map"};
  return names;
}

runtime::ParamDef enumeration(const char* name, const char* type,
                              const std::vector<std::string>& names) {
  runtime::ParamDef param = common::raw_param(name);
  param.enum_type = std::string("specjit_kernels::") + type;
  param.enum_names = names;
  return param;
}

// The persistent schedules' grid: as many CTAs as the device holds at once (the engine asks
// once per variant), at most one per tile (dynamic) or per step (stream-K, whose CTAs also need
// the workspace's scratch: k_stream_k_max_ctas counters, two slots of 64 x block_m sums per MMA a
// CTA).
llvm::Expected<unsigned> persistent_ctas(runtime::Engine& engine, const runtime::Variant& variant,
                                         const runtime::LaunchConfig& launch, const WgmmaGemm& g,
                                         int64_t blocks) {
  auto resident = engine.resident_ctas(variant, launch);
  if (!resident)
    return resident.takeError();
  const int64_t tiles = blocks * (g.weight_rows() / g.block_n);
  if (g.schedule == MoeSchedule::dynamic) // whole tiles, no scratch slots
    return static_cast<unsigned>(std::min<int64_t>(*resident, tiles));
  const int64_t slot_floats = 64 * g.block_m * (g.gemm == 1 ? 2 : 1); // GEMM1: gate and up MMAs
  return static_cast<unsigned>(
      std::min<int64_t>({int64_t{*resident}, int64_t{k_stream_k_max_ctas},
                         k_stream_k_slot_floats / (2 * slot_floats), tiles * (g.k_bytes() / 128)}));
}

specjit_kernels::TmaDesc to_desc(const CUtensorMap& map) {
  static_assert(sizeof(CUtensorMap) == sizeof(specjit_kernels::TmaDesc),
                "a tensor map travels as the kernels' TmaDesc");
  specjit_kernels::TmaDesc desc;
  std::memcpy(&desc, &map, sizeof desc);
  return desc;
}

// The weights' map: rank 3 over the row-major bytes {K bytes, rows of an expert, experts}, or
// rank 4 over the packed copy; boxes of 128 bytes x the stage's rows (GEMM1: its gate half and
// its up half, loaded separately). Bulk reads of the packed copy get the rank-3 map unused.
llvm::Expected<CUtensorMap> weight_map(const MoeShape& s, const WgmmaGemm& g, CUdeviceptr data) {
  const uint32_t box_rows = static_cast<uint32_t>(g.gemm == 1 ? g.block_n / 2 : g.block_n);
  if (g.weights == MoeWeightReads::packed_map)
    return runtime::tensor_map_packed_weights(data, s.experts * g.weight_rows(), g.k_bytes(),
                                              k_moe_piece_rows, box_rows);
  return runtime::tensor_map_u8_3d(data,
                                   {static_cast<uint64_t>(g.k_bytes()),
                                    static_cast<uint64_t>(g.weight_rows()),
                                    static_cast<uint64_t>(s.experts)},
                                   {128, box_rows, 1});
}

} // namespace

WgmmaGemm WgmmaGemm::of(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile,
                        MoeWeightLayout layout, MoePackedReads reads) {
  WgmmaGemm g;
  g.gemm = gemm;
  g.dtype = shape.dtype;
  g.n = gemm == 1 ? shape.intermediate : shape.hidden;
  g.k = gemm == 1 ? shape.hidden : shape.intermediate;
  if (tile.f16_tokens)
    g.orientation = f16_tokens_sorted(shape) ? MoeOrientation::swap_ab_f16_sorted
                                             : MoeOrientation::swap_ab_f16_tokens;
  else if (tile.swap_ab)
    g.orientation = MoeOrientation::swap_ab;
  else
    g.orientation =
        tile.e4m3 && tile.sorted_tokens ? MoeOrientation::normal_sorted : MoeOrientation::normal;
  g.block_m = block_m;
  g.block_n = tile.block_n;
  g.warpgroups = tile.warpgroups;
  g.stages = tile.stages;
  g.split_k = tile.split_k;
  g.schedule = tile.schedule;
  g.tiles = tile.persistent() ? 1 : tile.tiles;
  g.weights = weight_reads(tile, layout, reads);
  g.e4m3 = tile.e4m3;
  g.whole_k = tile.whole_k && (tile.e4m3 || (gemm == 2 && shape.dtype == MoeDType::fp8));
  return g;
}

std::vector<int64_t> WgmmaGemm::values(int64_t num_tokens) const {
  return {n,
          k,
          static_cast<int64_t>(orientation),
          block_m,
          block_n,
          warpgroups,
          stages,
          split_k,
          static_cast<int64_t>(schedule),
          tiles,
          static_cast<int64_t>(weights),
          num_tokens};
}

int64_t WgmmaGemm::fixed_ctas(int64_t blocks) const {
  return ceil_div(blocks, k_grouped_blocks) * k_grouped_blocks * (weight_rows() / block_n / tiles) *
         split_k;
}

runtime::KernelDef wgmma_gemm_kernel(int gemm, MoeDType dtype, bool e4m3, bool whole_k) {
  using common::raw_param;
  runtime::KernelDef def = gemm_kernel_def(
      "wgmma", gemm, dtype, "moe/gemm_wgmma.cu",
      {enumeration("orientation", "MoeOrientation", orientation_names()), raw_param("block_m"),
       raw_param("block_n"), raw_param("warpgroups"), raw_param("stages"), raw_param("split_k"),
       enumeration("schedule", "MoeSchedule", schedule_names()), raw_param("tiles"),
       enumeration("weights", "MoeWeightReads", weight_read_names())});
  // FP8 GEMM1 on e4m3 tensor cores and FP8 GEMM2 over the whole K: the same parameters, their
  // own entry points.
  if (gemm == 1 && e4m3)
    def.id = whole_k ? "moe_wgmma1_e4m3w" : "moe_wgmma1_e4m3";
  else if (gemm == 2 && dtype == MoeDType::fp8 && whole_k)
    def.id = "moe_wgmma2_e4m3w";
  def.function = "specjit_kernels::" + def.id;
  return def;
}

bool WgmmaGemm::f16_tokens() const {
  return orientation == MoeOrientation::swap_ab_f16_tokens ||
         orientation == MoeOrientation::swap_ab_f16_sorted;
}

bool WgmmaGemm::swap_ab() const {
  return orientation != MoeOrientation::normal && orientation != MoeOrientation::normal_sorted;
}

unsigned WgmmaGemm::threads() const {
  // The sorted copies' tiles launch them too; three exit (kernels_src/moe/wgmma_pipeline.cuh).
  const int producer_warps = gemm == 1 && (!swap_ab() || f16_tokens()) ? 4 : 1;
  return static_cast<unsigned>(128 * warpgroups + 32 * producer_warps);
}

unsigned WgmmaGemm::shared_bytes() const {
  const bool t16 = f16_tokens();
  const unsigned rows = static_cast<unsigned>(block_m * (t16 ? 2 : 1) + block_n);
  unsigned dynamic = static_cast<unsigned>(stages) * rows * k_moe_row_bytes;
  dynamic += 1024; // room to align the tiles to 1024 bytes
  // FP8 GEMM1's f16 copies of its B operand (kernels_src/moe/wgmma_consume_f16.cuh): swap-AB the
  // token tile, double-buffered per warpgroup; normal the weight tile, one buffer per K half.
  if (dtype == MoeDType::fp8 && gemm == 1 && !t16 && !e4m3)
    dynamic += swap_ab() ? 4u * warpgroups * block_m * k_moe_row_bytes
                         : 2u * static_cast<unsigned>(block_n) * k_moe_row_bytes;
  // The f16-token GEMM1 stages its e4m3 outputs, 64 columns x block_m a warpgroup
  // (moe_t16_outputs in kernels_src/moe/gemm_wgmma.cu).
  if (t16)
    dynamic += static_cast<unsigned>(warpgroups * block_m) * 64u;
  // The normal orientation stages its bf16 outputs, 16 rows x up to 128 bytes a warp
  // (moe_normal_staged): GEMM1's block_n / 2 columns, GEMM2's block_n. FP8 GEMM1 stores its
  // e4m3 pairs directly (its f16 weight copy leaves no room).
  if (!swap_ab() && (gemm == 2 || dtype == MoeDType::bf16)) {
    const int row_bytes = 2 * output_columns();
    dynamic += static_cast<unsigned>(warpgroups * 4 * 16 * std::min(row_bytes, 128));
  }
  return shared_bytes_with_static(dynamic, static_shared_bytes());
}

unsigned WgmmaGemm::static_shared_bytes() const {
  // The token block's gathered rows and slots (4 bytes each a row), two mbarriers a stage, and
  // the persistent schedules' own: the dynamic schedule's ring of tile indices, stream-K's flag
  // (kernels_src/moe/wgmma_schedules.cuh, wgmma_reduce.cuh).
  unsigned bytes = 8u * static_cast<unsigned>(block_m) + 16u * static_cast<unsigned>(stages);
  if (schedule == MoeSchedule::dynamic)
    bytes += static_cast<unsigned>(sizeof(int) * specjit_kernels::k_dynamic_ring);
  else if (schedule == MoeSchedule::stream_k)
    bytes += 4u;
  // ptxas ends the static part on the 1024-byte alignment of the dynamic tiles after it. (It may
  // allocate a step less where a variant never reads an array: an upper bound, as the limit
  // check needs.)
  return (bytes + 1023u) / 1024u * 1024u;
}

llvm::Error launch_wgmma_gemm(runtime::Engine& engine, const MoeShape& s, const WgmmaGemm& g,
                              const MoeBuffers& b, int64_t tokens, const WgmmaLaunch& how,
                              CUstream stream) {
  runtime::LaunchConfig launch;
  // fused_moe checked the grid against k_max_grid_x. A split-K cluster is split_k consecutive
  // CTAs.
  launch.grid[0] = static_cast<unsigned>(g.fixed_ctas(how.blocks));
  launch.cluster_x = static_cast<unsigned>(g.split_k);
  launch.programmatic_serialization = how.programmatic;
  launch.block[0] = g.threads();
  launch.shared_bytes = g.shared_bytes();
  launch.stream = stream;
  const CUdeviceptr weight_data = g.gemm == 1 ? b.w13 : b.w2;
  auto map = weight_map(s, g, weight_data);
  if (!map)
    return map.takeError();
  // Bulk reads take the packed copy from its address (the map goes unused).
  const CUdeviceptr bulk_from = g.weights == MoeWeightReads::packed_bulk ? weight_data : 0;
  // Looked up once: the persistent schedules size their grid from it.
  auto variant =
      get_variant(engine, gemm_index(g.gemm, g.dtype, MoeGemmKernel::wgmma, g.e4m3, g.whole_k),
                  g.values(tokens));
  if (!variant)
    return variant.takeError();
  if (g.persistent()) {
    auto ctas = persistent_ctas(engine, **variant, launch, g, how.blocks);
    if (!ctas)
      return ctas.takeError();
    launch.grid[0] = *ctas;
  }
  if (g.gemm == 1) {
    specjit_kernels::MoeWgmmaGemm1Args args{};
    args.w13_map = to_desc(*map);
    // The tiles on a sorted copy of the tokens read it by tensor map, one box of block_m rows
    // a stage (f16: one per K half). The other tiles read no map there, so they get the
    // weights' again; the f16-token tiles in token order gather from the copy instead of hidden.
    args.tokens_map = args.w13_map;
    if (g.orientation == MoeOrientation::swap_ab_f16_sorted ||
        g.orientation == MoeOrientation::normal_sorted) {
      const int64_t row_bytes = g.f16_tokens() ? 2 * s.hidden : s.hidden; // f16 or e4m3
      auto sorted_map = runtime::tensor_map_u8_3d(
          b.tokens_f16,
          {static_cast<uint64_t>(row_bytes), static_cast<uint64_t>(b.tokens_f16_rows), 1},
          {128, static_cast<uint32_t>(g.block_m), 1});
      if (!sorted_map)
        return sorted_map.takeError();
      args.tokens_map = to_desc(*sorted_map);
    }
    args.hidden = device_pointer<const unsigned char>(
        g.orientation == MoeOrientation::swap_ab_f16_tokens ? b.tokens_f16 : b.hidden);
    fill_gemm1_args(args, s, b, tokens);
    args.scratch = device_pointer<unsigned char>(b.scratch);
    args.handoff = how.handoff;
    args.group_blocks = how.group_blocks;
    args.w13_packed = device_pointer<const unsigned char>(bulk_from);
    return engine.launch(**variant, launch, args);
  }
  // GEMM2's token rows: the intermediate in sorted order, one box of block_m rows.
  auto inter_map = runtime::tensor_map_u8_3d(
      b.intermediate, {static_cast<uint64_t>(g.k_bytes()), static_cast<uint64_t>(b.max_padded), 1},
      {128, static_cast<uint32_t>(g.block_m), 1});
  if (!inter_map)
    return inter_map.takeError();
  specjit_kernels::MoeWgmmaGemm2Args args{};
  args.w2_map = to_desc(*map);
  args.intermediate_map = to_desc(*inter_map);
  fill_gemm2_args(args, s, b, tokens);
  args.scratch = device_pointer<unsigned char>(b.scratch);
  args.handoff_target = how.handoff;
  args.group_blocks = how.group_blocks;
  args.w2_packed = device_pointer<const unsigned char>(bulk_from);
  return engine.launch(**variant, launch, args);
}

} // namespace specjit::ops::moe_detail
