#include "ops/moe/config.h"
#include "ops/moe/detail.h"

#include "ops/moe/gemm_mma.h"
#include "ops/moe/gemm_wgmma.h"
#include "runtime/specialization.h"

#include "support/error.h"
#include "support/logging.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <set>

namespace specjit::ops {

namespace {

constexpr int k_row_bytes = 128; // BLOCK_K in bytes (kernels_src/moe/gemm.cu)

bool is_pow2_in(int value, int low, int high) {
  return value >= low && value <= high && (value & (value - 1)) == 0;
}

// What one GEMM's tile is checked against: its shape (out_columns outputs, K), its role.
struct TileUse {
  int block_m;
  int64_t out_columns; // GEMM1: I (gate and up rows are 2I), GEMM2: H
  int64_t k;           // values of K
  bool gated;          // GEMM1
  bool fp8;
  int64_t top_k;
};

// Each rule returns why the tile breaks it, or an empty string.

// Tiles per CTA (normal orientation and f16 tokens): any count of whole tiles of the outputs up
// to 64, not only powers of two: DeepSeek GEMM2's 56 tiles of 128 in CTAs of 14 measured 1.3 %
// faster at T = 4096 than 8 (28 and 56: slower, too few CTAs).
std::string whole_tiles_rule(const GemmTile& t, const TileUse& u) {
  if (t.tiles < 1 || t.tiles > 64)
    return "tiles must be 1 to 64";
  const int64_t per_tile = u.gated ? t.block_n / 2 : t.block_n;
  if (u.out_columns % (per_tile * t.tiles) != 0)
    return fmt::format("{} output columns are not a multiple of {} tiles of {}", u.out_columns,
                       t.tiles, per_tile);
  return "";
}

std::string f16_tokens_rule(const GemmTile& t, const TileUse& u) {
  if (!u.gated || !u.fp8)
    return "f16_tokens is for FP8 GEMM1";
  if (!t.swap_ab)
    return "f16_tokens needs swap_ab";
  if (t.block_n != 128 * t.warpgroups)
    return fmt::format("f16_tokens needs block_n = 128 x warpgroups = {} (64 output columns a "
                       "warpgroup)",
                       128 * t.warpgroups);
  if (t.split_k != 1 || t.stream_k())
    return "f16_tokens needs no split_k and the fixed or dynamic schedule";
  // The dynamic schedule takes one tile at a time from its counter.
  if (t.dynamic() && t.tiles != 1)
    return "f16_tokens with the dynamic schedule needs tiles 1";
  // Several tiles per CTA: the next tile's stages fill while the consumers write this one's
  // outputs (one CTA an SM: nothing else would).
  if (std::string why = whole_tiles_rule(t, u); !why.empty())
    return "f16_tokens: " + why;
  // TOK accumulators a thread (gate and up, 64 x block_m each) and a stage of A fragments. The
  // workspace's sorted f16 copy is padded for this largest block (ops/moe/detail.h,
  // k_max_f16_tokens_block_m).
  if (!is_pow2_in(u.block_m, 8, 128))
    return "f16_tokens needs block_m in 8, 16, 32, 64, 128";
  return "";
}

// e4m3 GEMM1 holds each stage's partial sums beside its fp32 totals (moe_consume_e4m3 in
// kernels_src/moe/wgmma_consume.cuh): swap-AB's gate and up totals are block_m values a thread,
// which past 128 (or 64 beside a second warpgroup's share of the registers) spill.
std::string e4m3_rule(const GemmTile& t, const TileUse& u) {
  if (!u.gated || !u.fp8)
    return "e4m3 is for FP8 GEMM1 (FP8 GEMM2 always accumulates so)";
  if (t.kernel != MoeGemmKernel::wgmma)
    return "e4m3 needs a wgmma tile";
  if (t.f16_tokens)
    return "e4m3 reads the e4m3 tokens: not with f16_tokens";
  if (t.swap_ab && u.block_m > (t.warpgroups == 2 ? 64 : 128))
    return "e4m3 swap-AB needs block_m <= 128 (<= 64 with 2 warpgroups)";
  // The sorted copy lives in the f16 copy's workspace (sized for top_k <= 2 and its blocks).
  if (t.sorted_tokens && (t.swap_ab || u.top_k > moe_detail::k_f16_tokens_sorted_top_k ||
                          u.block_m > moe_detail::k_max_f16_tokens_block_m))
    return fmt::format("sorted_tokens needs the normal orientation, top_k <= {} and block_m <= {}",
                       moe_detail::k_f16_tokens_sorted_top_k, moe_detail::k_max_f16_tokens_block_m);
  return "";
}

std::string swap_ab_rule(const GemmTile& t, const TileUse& u) {
  if (t.f16_tokens)
    return f16_tokens_rule(t, u);
  // GEMM1 also packs 32 gate over 32 up rows (block_n 64: 32 output columns per CTA).
  if (t.block_n != 64 * (u.gated ? 2 : 1) && !(u.gated && t.block_n == 64))
    return fmt::format("swap-AB needs block_n = {}{} (64 output columns per CTA)",
                       64 * (u.gated ? 2 : 1), u.gated ? " or 64" : "");
  if (!is_pow2_in(u.block_m, 8, 256))
    return "swap-AB needs block_m in 8, 16, 32, 64, 128, 256";
  if (!is_pow2_in(t.split_k, 1, 8))
    return "split_k must be 1, 2, 4 or 8";
  // Each warpgroup keeps its own stages (kernels_src/moe/wgmma_pipeline.cuh).
  if (t.warpgroups == 2 && t.stages % 2 != 0)
    return "swap-AB with 2 warpgroups needs an even number of stages";
  if (!is_pow2_in(t.tiles, 1, 8))
    return "tiles must be 1, 2, 4 or 8";
  if (t.tiles > 1 && (t.warpgroups != 1 || t.split_k != 1 || (u.gated && t.block_n == 64)))
    return "several tiles per CTA need one warpgroup, no split_k and an unpacked tile";
  if (t.persistent() &&
      (t.warpgroups != 1 || t.split_k != 1 || t.tiles != 1 || (u.gated && t.block_n == 64)))
    return fmt::format("{} needs one warpgroup, no split_k, one tile and an unpacked tile",
                       t.stream_k() ? "stream_k" : "dynamic");
  // The partial sums of a split tile (64 x block_m per MMA) fill one slot of the workspace's
  // stream-K scratch (kernels_src/moe/wgmma_pipeline.cuh).
  if (t.stream_k() && u.block_m > 32)
    return "stream_k needs block_m <= 32";
  if (t.tiles > 1 && u.out_columns % (64 * t.tiles) != 0)
    return fmt::format("{} output columns are not a multiple of {} tiles of 64", u.out_columns,
                       t.tiles);
  // Every CTA of the cluster takes K / split_k, at least one 128-byte stage per warpgroup.
  const int64_t k_tiles = u.k * (u.fp8 ? 1 : 2) / k_row_bytes;
  if (k_tiles % t.split_k != 0 || k_tiles / t.split_k < t.warpgroups)
    return fmt::format("K = {} ({} stages of 128 bytes) does not split into {} parts of at least "
                       "{} stages",
                       u.k, k_tiles, t.split_k, t.warpgroups);
  // The first CTA of a split-K cluster receives the others' fp32 partial sums (one 64-row
  // accumulator per MMA) in its stage memory.
  const int64_t mmas = u.gated && t.block_n == 128 ? 2 : 1;
  const int64_t partials = (t.split_k - 1) * mmas * 64 * u.block_m * 4;
  if (partials > int64_t{t.stages} * (u.block_m + t.block_n) * k_row_bytes)
    return fmt::format("the {} partial sums of split_k {} do not fit in the stage memory",
                       t.split_k - 1, t.split_k);
  return "";
}

std::string wgmma_rule(const GemmTile& t, const TileUse& u, const Arch& arch) {
  if (!(arch.major == 9 && arch.minor == 0 && arch.arch_specific))
    return fmt::format("wgmma needs sm_90a, the target is {}", arch.name());
  if (t.warpgroups < 1 || t.warpgroups > 2)
    return "1 or 2 warpgroups";
  if (t.stages < moe_detail::k_wgmma_min_stages)
    return fmt::format("wgmma needs at least {} pipeline stages", moe_detail::k_wgmma_min_stages);
  if (t.swap_ab)
    return swap_ab_rule(t, u);
  if (t.f16_tokens)
    return "f16_tokens needs swap_ab";
  if (t.split_k != 1 || t.stream_k())
    return "split_k and stream_k need the swap-AB orientation";
  if (t.dynamic() && t.tiles != 1)
    return "dynamic takes its tiles one at a time: tiles 1";
  if (u.block_m != 64 * t.warpgroups)
    return fmt::format("the normal orientation needs block_m = 64 x warpgroups = {}",
                       64 * t.warpgroups);
  if (!is_pow2_in(t.block_n, 64, 256))
    return "block_n must be 64, 128 or 256";
  // FP8 GEMM2 promoted once a stage holds each stage's e4m3 sums beside its fp32 totals
  // (moe/wgmma_consume.cuh): 256 columns would be 256 fp32 values a thread, past the 255
  // registers (ptxas spills 164 bytes; on the H200, Qwen3 T = 64, it ran 1.3-4x slower than 128
  // wide). Over the whole K it holds only the totals, 128 a thread.
  if (u.fp8 && !u.gated && t.block_n == 256 && !t.whole_k)
    return "FP8 GEMM2 promoted once a stage holds 2 x block_n / 2 fp32 sums a thread: block_n "
           "256 spills, use 128 or whole_k";
  return whole_tiles_rule(t, u);
}

std::string mma_rule(const GemmTile& t, const TileUse& u) {
  if (t.split_k != 1 || t.tiles != 1 || t.persistent() || t.f16_tokens ||
      t.packed_reads != MoePackedReads::automatic)
    return "split_k, tiles, stream_k, dynamic, f16_tokens and reads need a wgmma tile";
  if (t.warps_m < 1 || t.warps_n < 1 || t.warps_m * t.warps_n > 16)
    return "1 to 16 warps";
  if (u.block_m % (16 * t.warps_m) != 0)
    return "block_m must be a multiple of 16 x warps_m";
  if (t.block_n < 16 || t.block_n % (16 * t.warps_n) != 0)
    return "block_n must be a multiple of 16 x warps_n";
  return "";
}

llvm::Error check_tile(const char* which, const GemmTile& t, const TileUse& u, const Arch& arch) {
  std::string why;
  if (t.stages < 2 || t.stages > 8)
    why = "2 to 8 pipeline stages";
  else if (t.sorted_tokens && !t.e4m3)
    why = "sorted_tokens is for e4m3 tiles";
  else if (t.whole_k && !t.e4m3 && (u.gated || !u.fp8 || t.kernel != MoeGemmKernel::wgmma))
    why = "whole_k is for e4m3 GEMM1 tiles and FP8 wgmma GEMM2 tiles";
  else if (t.e4m3)
    why = e4m3_rule(t, u);
  if (why.empty())
    why = t.kernel == MoeGemmKernel::wgmma ? wgmma_rule(t, u, arch) : mma_rule(t, u);
  const int64_t per_tile = u.gated ? t.block_n / 2 : t.block_n;
  if (why.empty() && u.out_columns % per_tile != 0)
    why = fmt::format("{} output columns are not a multiple of {}", u.out_columns, per_tile);
  const unsigned max_shared = moe_shared_limit(arch);
  if (why.empty() && moe_gemm_shared_total(u.block_m, t, u.fp8 ? MoeDType::fp8 : MoeDType::bf16,
                                           u.gated ? 1 : 2) > max_shared)
    why = fmt::format("more than {} KiB of shared memory", max_shared / 1024);
  if (why.empty())
    return llvm::Error::success();
  return make_error(Errc::invalid_argument, "fused_moe: {} tile {} (block_m {}): {}", which,
                    t.describe(), u.block_m, why);
}

} // namespace

unsigned moe_shared_limit(const Arch& arch) {
  return static_cast<unsigned>(runtime::DeviceFacts::for_target(arch).shared_per_block_optin);
}

llvm::StringRef moe_dtype_name(MoeDType dtype) { return dtype == MoeDType::fp8 ? "fp8" : "bf16"; }

llvm::StringRef moe_accumulation_name(MoeAccumulation accumulation) {
  return accumulation == MoeAccumulation::exact ? "exact" : "e4m3";
}

std::optional<MoeAccumulation> parse_moe_accumulation(llvm::StringRef name) {
  if (name == "e4m3")
    return MoeAccumulation::e4m3;
  if (name == "exact")
    return MoeAccumulation::exact;
  return std::nullopt;
}

llvm::StringRef moe_gemm_kernel_name(MoeGemmKernel kernel) {
  return kernel == MoeGemmKernel::wgmma ? "wgmma" : "mma";
}

GemmTile GemmTile::wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups, int split_k,
                              int tiles) {
  GemmTile t;
  t.kernel = MoeGemmKernel::wgmma;
  t.block_n = block_n;
  t.stages = stages;
  t.swap_ab = swap_ab;
  t.warpgroups = warpgroups;
  t.split_k = split_k;
  t.tiles = tiles;
  return t;
}

std::string GemmTile::describe() const {
  if (kernel == MoeGemmKernel::wgmma)
    return fmt::format("wgmma{} n{} g{} s{}{}{}{}{}{}{}{}", swap_ab ? "-swap" : "", block_n,
                       warpgroups, stages, split_k > 1 ? fmt::format(" k{}", split_k) : "",
                       tiles > 1 ? fmt::format(" t{}", tiles) : "",
                       stream_k()  ? " sk"
                       : dynamic() ? " dyn"
                                   : "",
                       f16_tokens ? " f16" : "", sorted_tokens ? " sorted" : "",
                       packed_reads == MoePackedReads::automatic
                           ? ""
                           : " " + moe_packed_reads_name(packed_reads).str(),
                       whole_k ? " e4m3w"
                       : e4m3  ? " e4m3"
                               : "");
  return fmt::format("n{} w{}x{} s{}", block_n, warps_m, warps_n, stages);
}

unsigned GemmTile::threads(int gemm) const {
  // Threads depend on no size of the shape; the families' files hold the rule.
  const MoeShape any{1, 1, 128, 128, MoeDType::fp8};
  return kernel == MoeGemmKernel::wgmma
             ? moe_detail::WgmmaGemm::of(any, gemm, 8, *this, MoeWeightLayout::row_major,
                                         MoePackedReads::automatic)
                   .threads()
             : moe_detail::MmaGemm::of(any, gemm, 16, *this).threads();
}

std::string MoeTileConfig::describe() const {
  return fmt::format("m{} g1[{}] g2[{}]", block_m, gemm1.describe(), gemm2.describe());
}

namespace {

// A GEMM's dynamic request and static shared memory. They depend on no size of the shape; the
// families' files hold the rule.
struct SharedBytes {
  unsigned dynamic, fixed;
};
template <class Gemm> SharedBytes shared_of(const Gemm& g) {
  return {g.shared_bytes(), g.static_shared_bytes()};
}
SharedBytes gemm_shared(int block_m, const GemmTile& tile, MoeDType dtype, int gemm) {
  const MoeShape any{1, 1, 128, 128, dtype};
  return tile.kernel == MoeGemmKernel::wgmma
             ? shared_of(moe_detail::WgmmaGemm::of(
                   any, gemm, block_m, tile, MoeWeightLayout::row_major, MoePackedReads::automatic))
             : shared_of(moe_detail::MmaGemm::of(any, gemm, block_m, tile));
}

} // namespace

unsigned moe_gemm_shared_bytes(int block_m, const GemmTile& tile, MoeDType dtype, int gemm) {
  return gemm_shared(block_m, tile, dtype, gemm).dynamic;
}

unsigned moe_gemm_shared_total(int block_m, const GemmTile& tile, MoeDType dtype, int gemm) {
  const SharedBytes bytes = gemm_shared(block_m, tile, dtype, gemm);
  return bytes.dynamic + bytes.fixed;
}

llvm::StringRef moe_packed_reads_name(MoePackedReads reads) {
  switch (reads) {
  case MoePackedReads::automatic:
    return "automatic";
  case MoePackedReads::bulk:
    return "bulk";
  case MoePackedReads::tensor_map:
    return "map";
  }
  return "automatic";
}

llvm::StringRef moe_weight_layout_name(MoeWeightLayout layout) {
  return layout == MoeWeightLayout::packed ? "packed" : "row_major";
}

std::optional<MoeWeightLayout> parse_moe_weight_layout(llvm::StringRef name) {
  for (MoeWeightLayout layout : {MoeWeightLayout::row_major, MoeWeightLayout::packed})
    if (name == moe_weight_layout_name(layout))
      return layout;
  return std::nullopt;
}

const MoeConfigEntry* MoeConfigTable::find(const MoeShape& shape,
                                           const runtime::DeviceFacts& target,
                                           MoeWeightLayout weights) const {
  return find(shape, target.arch, target.name, weights);
}

const MoeConfigEntry* MoeConfigTable::find(const MoeShape& shape, const Arch& arch,
                                           llvm::StringRef device, MoeWeightLayout weights) const {
  // The device's own entries first, then those of any device; in each, the weights' layout,
  // then row-major.
  for (bool own : {true, false}) {
    const MoeConfigEntry* row_major = nullptr;
    for (const MoeConfigEntry& entry : entries) {
      const bool serves =
          own ? !entry.device.empty() && entry.device == device : entry.device.empty();
      if (!serves || !(entry.shape == shape) || !(entry.arch == arch) || entry.buckets.empty())
        continue;
      if (entry.weights == weights)
        return &entry;
      if (entry.weights == MoeWeightLayout::row_major)
        row_major = &entry;
    }
    if (row_major != nullptr)
      return row_major;
  }
  return nullptr;
}

llvm::Error check_moe_gemm_tile(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile,
                                const Arch& arch) {
  const bool fp8 = shape.dtype == MoeDType::fp8;
  if (block_m < 8 || block_m > 256 || block_m % 8 != 0)
    return make_error(Errc::invalid_argument,
                      "fused_moe: block_m must be a multiple of 8 in [8, 256], got {}", block_m);
  if (gemm == 1)
    return check_tile("gemm1", tile,
                      {block_m, shape.intermediate, shape.hidden, true, fp8, shape.top_k}, arch);
  if (gemm == 2)
    return check_tile("gemm2", tile,
                      {block_m, shape.hidden, shape.intermediate, false, fp8, shape.top_k}, arch);
  return make_error(Errc::invalid_argument, "fused_moe: no GEMM {} (1 or 2)", gemm);
}

llvm::Error check_moe_config(const MoeShape& shape, const MoeTileConfig& config, const Arch& arch) {
  if (auto err = check_moe_gemm_tile(shape, 1, config.block_m, config.gemm1, arch))
    return err;
  return check_moe_gemm_tile(shape, 2, config.block_m, config.gemm2, arch);
}

llvm::Expected<ResolvedMoeConfig> resolve_moe_config(const MoeShape& shape, int64_t num_tokens,
                                                     const Arch& arch, const MoeConfigTable* table,
                                                     MoeWeightLayout weights) {
  return resolve_moe_config(shape, num_tokens, runtime::DeviceFacts::for_target(arch), table,
                            weights);
}

namespace {

// Says once per process, shape and device when the table holds entries of the shape for other
// devices of the target's arch only: tuned tiles are a device's, so the default rule decides.
void note_other_devices(const MoeConfigTable& table, const MoeShape& shape,
                        const runtime::DeviceFacts& target) {
  std::string devices;
  for (const MoeConfigEntry& entry : table.entries)
    if (entry.shape == shape && entry.arch == target.arch && !entry.device.empty() &&
        devices.find(entry.device) == std::string::npos)
      devices += (devices.empty() ? "" : ", ") + entry.device;
  if (devices.empty())
    return;
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::string key = fmt::format(
      "{}x{} {}x{} {} {} on '{}'", shape.experts, shape.top_k, shape.hidden, shape.intermediate,
      moe_dtype_name(shape.dtype).str(), target.arch.name(), target.name);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!said.insert(key).second)
      return;
  }
  log_warning(llvm::Twine("fused_moe: the table's entries for ") + key.substr(0, key.find(" on ")) +
              " are tuned for " + devices + ", not for " +
              (target.name.empty() ? std::string("an unnamed device") : "'" + target.name + "'") +
              ": the default rule decides (name the device when precompiling)");
}

} // namespace

llvm::Expected<ResolvedMoeConfig> resolve_moe_config(const MoeShape& shape, int64_t num_tokens,
                                                     const runtime::DeviceFacts& target,
                                                     const MoeConfigTable* table,
                                                     MoeWeightLayout weights) {
  const Arch& arch = target.arch;
  ResolvedMoeConfig resolved;
  const MoeConfigEntry* entry = table ? table->find(shape, target, weights) : nullptr;
  if (entry)
    for (const MoeConfigBucket& bucket : entry->buckets)
      resolved.bounds.push_back(bucket.max_tokens);
  else
    resolved.bounds = default_moe_buckets();
  if (table && !entry)
    note_other_devices(*table, shape, target);
  // Counts above the last bound take the last bucket's configuration, declared as the
  // policy's overflow bucket: a tile choice, not an upper bound any kernel is told.
  auto spec = runtime::specialize(runtime::Policy::bucketed(resolved.bounds, /*overflow=*/true),
                                  num_tokens);
  if (!spec)
    return spec.takeError();
  resolved.bucket =
      spec->raw() == runtime::k_unbounded_bucket ? resolved.bounds.back() : spec->raw();
  if (entry) {
    for (const MoeConfigBucket& bucket : entry->buckets)
      if (bucket.max_tokens == resolved.bucket)
        resolved.config = bucket.config;
  } else {
    resolved.config = default_moe_config(shape, resolved.bucket, target);
  }
  if (auto err = check_moe_config(shape, resolved.config, arch))
    return err;
  return resolved;
}

} // namespace specjit::ops
