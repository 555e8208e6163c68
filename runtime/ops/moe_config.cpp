#include "runtime/ops/moe_config.h"

#include "runtime/specialization.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace specjit::ops {

namespace {

constexpr int k_row_bytes = 128; // BLOCK_K in bytes (kernels_src/moe/gemm.cu)
constexpr unsigned k_max_shared = 227 * 1024;
constexpr int64_t k_h200_sms = 132;

// Shrinks block_n (and then warps_n) until the tile divides `rows` of the weight.
GemmTile fit(GemmTile tile, int64_t out_columns, bool gated) {
  auto divides = [&](const GemmTile& t) {
    const int64_t per_tile = gated ? t.block_n / 2 : t.block_n;
    return t.block_n % (16 * t.warps_n) == 0 && per_tile % 8 == 0 && out_columns % per_tile == 0;
  };
  while (!divides(tile) && tile.block_n > 16) {
    tile.block_n /= 2;
    while (tile.block_n % (16 * tile.warps_n) != 0 && tile.warps_n > 1)
      tile.warps_n /= 2;
  }
  return tile;
}

bool is_pow2_in(int value, int low, int high) {
  return value >= low && value <= high && (value & (value - 1)) == 0;
}

llvm::Error check_tile(const char* which, int block_m, const GemmTile& t, int64_t out_columns,
                       int64_t k, bool gated, bool fp8, const Arch& arch) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::invalid_argument, "fused_moe: {} tile {} (block_m {}): {}", which,
                      t.describe(), block_m, why);
  };
  if (t.stages < 2 || t.stages > 8)
    return bad("2 to 8 pipeline stages");
  if (t.kernel == MoeGemmKernel::wgmma) {
    if (!(arch.major == 9 && arch.minor == 0 && arch.arch_specific))
      return bad(fmt::format("wgmma needs sm_90a, the target is {}", arch.name()));
    if (t.warpgroups < 1 || t.warpgroups > 2)
      return bad("1 or 2 warpgroups");
    if (t.stages < 3)
      return bad("wgmma needs at least 3 pipeline stages");
    if (t.swap_ab) {
      // GEMM1 also packs 32 gate over 32 up rows (block_n 64: 32 output columns per CTA).
      if (t.block_n != 64 * (gated ? 2 : 1) && !(gated && t.block_n == 64))
        return bad(fmt::format("swap-AB needs block_n = {}{} (64 output columns per CTA)",
                               64 * (gated ? 2 : 1), gated ? " or 64" : ""));
      if (!is_pow2_in(block_m, 8, 256))
        return bad("swap-AB needs block_m in 8, 16, 32, 64, 128, 256");
      if (!is_pow2_in(t.split_k, 1, 8))
        return bad("split_k must be 1, 2, 4 or 8");
      // Every CTA of the cluster takes K / split_k, at least one 128-byte stage per warpgroup.
      const int64_t k_tiles = k * (fp8 ? 1 : 2) / k_row_bytes;
      if (!is_pow2_in(t.tiles, 1, 8))
        return bad("tiles must be 1, 2, 4 or 8");
      if (t.tiles > 1 && (t.warpgroups != 1 || t.split_k != 1 || (gated && t.block_n == 64)))
        return bad("several tiles per CTA need one warpgroup, no split_k and an unpacked tile");
      if (t.tiles > 1 && out_columns % (64 * t.tiles) != 0)
        return bad(fmt::format("{} output columns are not a multiple of {} tiles of 64",
                               out_columns, t.tiles));
      if (k_tiles % t.split_k != 0 || k_tiles / t.split_k < t.warpgroups)
        return bad(fmt::format("K = {} ({} stages of 128 bytes) does not split into {} parts of "
                               "at least {} stages",
                               k, k_tiles, t.split_k, t.warpgroups));
    } else {
      if (t.split_k != 1 || t.tiles != 1)
        return bad("split_k and tiles need the swap-AB orientation");
      if (block_m != 64 * t.warpgroups)
        return bad(fmt::format("the normal orientation needs block_m = 64 x warpgroups = {}",
                               64 * t.warpgroups));
      if (!is_pow2_in(t.block_n, 64, 256))
        return bad("block_n must be 64, 128 or 256");
    }
  } else {
    if (t.split_k != 1 || t.tiles != 1)
      return bad("split_k and tiles need a wgmma tile");
    if (t.warps_m < 1 || t.warps_n < 1 || t.warps_m * t.warps_n > 16)
      return bad("1 to 16 warps");
    if (block_m % (16 * t.warps_m) != 0)
      return bad("block_m must be a multiple of 16 x warps_m");
    if (t.block_n < 16 || t.block_n % (16 * t.warps_n) != 0)
      return bad("block_n must be a multiple of 16 x warps_n");
  }
  const int64_t per_tile = gated ? t.block_n / 2 : t.block_n;
  if (out_columns % per_tile != 0)
    return bad(fmt::format("{} output columns are not a multiple of {}", out_columns, per_tile));
  if (moe_gemm_shared_bytes(block_m, t, fp8 ? MoeDType::fp8 : MoeDType::bf16) > k_max_shared)
    return bad("more than 227 KiB of shared memory");
  // The first CTA of a split-K cluster receives the others' fp32 partial sums (one 64-row
  // accumulator per MMA) in its stage memory.
  const int64_t mmas = gated && t.block_n == 128 ? 2 : 1;
  const int64_t partials = (t.split_k - 1) * mmas * 64 * block_m * 4;
  if (partials > int64_t{t.stages} * (block_m + t.block_n) * k_row_bytes)
    return bad(fmt::format("the {} partial sums of split_k {} do not fit in the stage memory",
                           t.split_k - 1, t.split_k));
  return llvm::Error::success();
}

// JSON helpers: integer fields with a named error.
llvm::Expected<int64_t> field(const llvm::json::Object& object, llvm::StringRef name,
                              llvm::StringRef where) {
  auto value = object.getInteger(name);
  if (!value)
    return make_error(Errc::invalid_argument, "moe config table: {}: missing integer '{}'",
                      where.str(), name.str());
  return *value;
}

llvm::Expected<GemmTile> parse_tile(const llvm::json::Object* object, llvm::StringRef where) {
  if (object == nullptr)
    return make_error(Errc::invalid_argument, "moe config table: {}: expected an object",
                      where.str());
  GemmTile tile;
  const llvm::StringRef kernel = object->getString("kernel").getValueOr("mma");
  if (kernel != "mma" && kernel != "wgmma")
    return make_error(Errc::invalid_argument,
                      "moe config table: {}: kernel must be \"mma\" or \"wgmma\", got \"{}\"",
                      where.str(), kernel.str());
  tile.kernel = kernel == "wgmma" ? MoeGemmKernel::wgmma : MoeGemmKernel::mma;
  std::vector<std::pair<int*, const char*>> fields = {{&tile.block_n, "block_n"},
                                                      {&tile.stages, "stages"}};
  if (tile.kernel == MoeGemmKernel::wgmma) {
    fields.push_back({&tile.warpgroups, "warpgroups"});
    auto swap = object->getBoolean("swap_ab");
    if (!swap)
      return make_error(Errc::invalid_argument, "moe config table: {}: missing boolean 'swap_ab'",
                        where.str());
    tile.swap_ab = *swap;
    if (object->get("split_k") != nullptr)
      fields.push_back({&tile.split_k, "split_k"});
    if (object->get("tiles") != nullptr)
      fields.push_back({&tile.tiles, "tiles"});
  } else {
    fields.push_back({&tile.warps_m, "warps_m"});
    fields.push_back({&tile.warps_n, "warps_n"});
  }
  for (auto [target, name] : fields) {
    auto value = field(*object, name, where);
    if (!value)
      return value.takeError();
    *target = static_cast<int>(*value);
  }
  return tile;
}

llvm::json::Object tile_json(const GemmTile& t) {
  if (t.kernel == MoeGemmKernel::wgmma) {
    llvm::json::Object o{{"kernel", "wgmma"},
                         {"swap_ab", t.swap_ab},
                         {"block_n", t.block_n},
                         {"warpgroups", t.warpgroups},
                         {"stages", t.stages}};
    if (t.split_k != 1)
      o["split_k"] = t.split_k;
    if (t.tiles != 1)
      o["tiles"] = t.tiles;
    return o;
  }
  return llvm::json::Object{{"block_n", t.block_n},
                            {"warps_m", t.warps_m},
                            {"warps_n", t.warps_n},
                            {"stages", t.stages}};
}

} // namespace

llvm::StringRef moe_dtype_name(MoeDType dtype) { return dtype == MoeDType::fp8 ? "fp8" : "bf16"; }

llvm::StringRef moe_gemm_kernel_name(MoeGemmKernel kernel) {
  return kernel == MoeGemmKernel::wgmma ? "wgmma" : "mma";
}

GemmTile GemmTile::wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups,
                              int split_k, int tiles) {
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
    return fmt::format("wgmma{} n{} g{} s{}{}{}", swap_ab ? "-swap" : "", block_n, warpgroups,
                       stages, split_k > 1 ? fmt::format(" k{}", split_k) : "",
                       tiles > 1 ? fmt::format(" t{}", tiles) : "");
  return fmt::format("n{} w{}x{} s{}", block_n, warps_m, warps_n, stages);
}

unsigned GemmTile::threads() const {
  return kernel == MoeGemmKernel::wgmma ? static_cast<unsigned>(128 * warpgroups + 32)
                                        : static_cast<unsigned>(32 * warps_m * warps_n);
}

std::string MoeTileConfig::describe() const {
  return fmt::format("m{} g1[{}] g2[{}]", block_m, gemm1.describe(), gemm2.describe());
}

unsigned moe_gemm_shared_bytes(int block_m, const GemmTile& tile, MoeDType dtype) {
  const bool wgmma = tile.kernel == MoeGemmKernel::wgmma;
  const unsigned rows = static_cast<unsigned>(block_m + tile.block_n);
  unsigned dynamic = static_cast<unsigned>(tile.stages) * rows * k_row_bytes;
  if (wgmma) {
    dynamic += 1024; // room to align the tiles to 1024 bytes
    if (dtype == MoeDType::fp8) // the f16 tiles (kernels_src/moe/gemm_wgmma.cu)
      dynamic += tile.swap_ab ? 4u * tile.warpgroups * block_m * k_row_bytes
                              : 2 * rows * k_row_bytes;
  }
  // Static shared memory: row and slot indices (8 * block_m bytes), wgmma's two mbarriers per
  // stage. When static + dynamic passes 48 KiB but the dynamic part alone does not, the engine
  // would not raise the function's dynamic limit and the launch fails
  // (CUDA_ERROR_INVALID_VALUE, seen while tuning): ask for just over 48 KiB of dynamic memory
  // so the limit is raised.
  const unsigned fixed = 8u * block_m + (wgmma ? 16u * tile.stages : 0u);
  constexpr unsigned k_default_limit = 48 * 1024;
  if (dynamic <= k_default_limit && dynamic + fixed > k_default_limit)
    return k_default_limit + 16;
  return dynamic;
}

const MoeConfigEntry* MoeConfigTable::find(const MoeShape& shape, const Arch& arch) const {
  for (const MoeConfigEntry& entry : entries)
    if (entry.shape == shape && entry.arch == arch && !entry.buckets.empty())
      return &entry;
  return nullptr;
}

const std::vector<int64_t>& default_moe_buckets() {
  static const std::vector<int64_t> buckets = {4, 16, 64, 256, 1024, 4096};
  return buckets;
}

namespace {

MoeTileConfig mma_default(const MoeShape& shape, int64_t per_expert, int64_t experts_hit) {
  MoeTileConfig c;
  if (per_expert <= 16) {
    // Weight streaming: 16-row tiles; narrow enough that the experts hit fill the GPU twice.
    c.block_m = 16;
    c.gemm1 = {64, 1, 4, 4};
    c.gemm2 = {64, 1, 4, 4};
    if (experts_hit * (2 * shape.intermediate / 64) < 2 * k_h200_sms)
      c.gemm1 = {32, 1, 2, 6};
    if (experts_hit * (shape.hidden / 64) < 2 * k_h200_sms)
      c.gemm2 = {32, 1, 2, 6};
  } else if (per_expert <= 48) {
    c.block_m = 32;
    c.gemm1 = {128, 2, 2, 4};
    c.gemm2 = {128, 2, 2, 4};
  } else if (per_expert <= 128) {
    c.block_m = 64;
    c.gemm1 = {128, 2, 2, 4};
    c.gemm2 = {128, 2, 2, 4};
  } else {
    c.block_m = 128;
    c.gemm1 = {128, 2, 4, 3};
    c.gemm2 = {128, 2, 4, 3};
  }
  c.gemm1 = fit(c.gemm1, shape.intermediate, true);
  c.gemm2 = fit(c.gemm2, shape.hidden, false);
  return c;
}

// The widest normal-orientation weight tile that divides the outputs: 256 rows (bf16; FP8 stays
// at 128, its f16 stage copy would not leave room for 4 stages), 128, 64.
int wgmma_block_n(int64_t out_columns, bool gated, bool fp8) {
  for (int block_n : {fp8 ? 128 : 256, 128, 64})
    if (out_columns % (gated ? block_n / 2 : block_n) == 0)
      return block_n;
  return 64;
}

MoeTileConfig wgmma_default(const MoeShape& shape, int64_t per_expert, int64_t experts_hit) {
  MoeTileConfig c;
  auto tile = [](int block_n, int stages, bool swap_ab, int warpgroups) {
    return GemmTile::wgmma_tile(block_n, stages, swap_ab, warpgroups);
  };
  if (per_expert <= 32) {
    // Swap-AB: the expert's weight rows fill wgmma's 64-row M, the few tokens its N.
    c.block_m = 8;
    while (c.block_m < per_expert)
      c.block_m *= 2;
    // Two warpgroups split K when the CTAs (64 output columns x expert) would not fill the GPU.
    auto split = [&](int64_t out_columns) { return experts_hit * (out_columns / 64) < k_h200_sms ? 2 : 1; };
    // Packed GEMM1 tiles (32 output columns) double the CTAs when 64-column tiles are too few.
    const bool packed = experts_hit * (shape.intermediate / 64) < 2 * k_h200_sms;
    c.gemm1 = tile(packed ? 64 : 128, 6, true, split(shape.intermediate));
    c.gemm2 = tile(64, 8, true, split(shape.hidden));
  } else {
    const int warpgroups = per_expert <= 96 ? 1 : 2;
    c.block_m = 64 * warpgroups;
    const bool fp8 = shape.dtype == MoeDType::fp8;
    c.gemm1 = tile(wgmma_block_n(shape.intermediate, true, fp8), 4, false, warpgroups);
    c.gemm2 = tile(wgmma_block_n(shape.hidden, false, fp8), 4, false, warpgroups);
  }
  return c;
}

} // namespace

MoeTileConfig default_moe_config(const MoeShape& shape, int64_t tokens, const Arch& arch) {
  const int64_t slots = std::max<int64_t>(tokens, 1) * shape.top_k;
  const int64_t per_expert = (slots + shape.experts - 1) / std::max<int64_t>(shape.experts, 1);
  const int64_t experts_hit = std::min(shape.experts, slots);
  if (arch.major == 9 && arch.minor == 0 && arch.arch_specific) {
    MoeTileConfig c = wgmma_default(shape, per_expert, experts_hit);
    llvm::Error err = check_moe_config(shape, c, arch);
    if (!err)
      return c;
    llvm::consumeError(std::move(err)); // e.g. a shape whose tiles do not fit: mma.sync
  }
  return mma_default(shape, per_expert, experts_hit);
}

llvm::Error check_moe_config(const MoeShape& shape, const MoeTileConfig& config,
                             const Arch& arch) {
  const bool fp8 = shape.dtype == MoeDType::fp8;
  if (config.block_m < 8 || config.block_m > 256 || config.block_m % 8 != 0)
    return make_error(Errc::invalid_argument,
                      "fused_moe: block_m must be a multiple of 8 in [8, 256], got {}",
                      config.block_m);
  if (auto err = check_tile("gemm1", config.block_m, config.gemm1, shape.intermediate,
                            shape.hidden, true, fp8, arch))
    return err;
  return check_tile("gemm2", config.block_m, config.gemm2, shape.hidden, shape.intermediate,
                    false, fp8, arch);
}

llvm::Expected<ResolvedMoeConfig> resolve_moe_config(const MoeShape& shape, int64_t num_tokens,
                                                     const Arch& arch,
                                                     const MoeConfigTable* table) {
  ResolvedMoeConfig resolved;
  const MoeConfigEntry* entry = table ? table->find(shape, arch) : nullptr;
  if (entry)
    for (const MoeConfigBucket& bucket : entry->buckets)
      resolved.bounds.push_back(bucket.max_tokens);
  else
    resolved.bounds = default_moe_buckets();
  auto spec = runtime::specialize(runtime::Policy::bucketed(resolved.bounds), num_tokens);
  if (!spec)
    return spec.takeError();
  resolved.bucket = spec->raw();
  if (entry) {
    for (const MoeConfigBucket& bucket : entry->buckets)
      if (bucket.max_tokens == resolved.bucket)
        resolved.config = bucket.config;
  } else {
    resolved.config = default_moe_config(shape, resolved.bucket, arch);
  }
  if (auto err = check_moe_config(shape, resolved.config, arch))
    return err;
  return resolved;
}

llvm::Expected<MoeConfigTable> parse_moe_config_table(llvm::StringRef json_text) {
  auto root = llvm::json::parse(json_text);
  if (!root)
    return make_error(Errc::invalid_argument, "moe config table: {}",
                      llvm::toString(root.takeError()));
  const llvm::json::Object* top = root->getAsObject();
  const llvm::json::Array* entries = top ? top->getArray("entries") : nullptr;
  if (entries == nullptr)
    return make_error(Errc::invalid_argument, "moe config table: expected {\"entries\": [...]}");
  MoeConfigTable table;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = fmt::format("entries[{}]", i);
    const llvm::json::Object* e = (*entries)[i].getAsObject();
    if (e == nullptr)
      return make_error(Errc::invalid_argument, "moe config table: {}: expected an object", where);
    MoeConfigEntry entry;
    int64_t* targets[] = {&entry.shape.experts, &entry.shape.intermediate, &entry.shape.hidden,
                          &entry.shape.top_k};
    const char* names[] = {"experts", "intermediate", "hidden", "top_k"};
    for (int f = 0; f < 4; ++f) {
      auto value = field(*e, names[f], where);
      if (!value)
        return value.takeError();
      *targets[f] = *value;
    }
    auto dtype = e->getString("dtype");
    if (!dtype || (*dtype != "fp8" && *dtype != "bf16"))
      return make_error(Errc::invalid_argument, "moe config table: {}: dtype must be fp8 or bf16",
                        where);
    entry.shape.dtype = *dtype == "fp8" ? MoeDType::fp8 : MoeDType::bf16;
    auto arch = Arch::parse(e->getString("arch").getValueOr(""));
    if (!arch)
      return make_error(Errc::invalid_argument, "moe config table: {}: {}", where,
                        llvm::toString(arch.takeError()));
    entry.arch = *arch;
    const llvm::json::Array* buckets = e->getArray("buckets");
    if (buckets == nullptr || buckets->empty())
      return make_error(Errc::invalid_argument, "moe config table: {}: no buckets", where);
    for (size_t b = 0; b < buckets->size(); ++b) {
      const std::string at = fmt::format("{}.buckets[{}]", where, b);
      const llvm::json::Object* o = (*buckets)[b].getAsObject();
      if (o == nullptr)
        return make_error(Errc::invalid_argument, "moe config table: {}: expected an object", at);
      MoeConfigBucket bucket;
      auto max_tokens = field(*o, "max_tokens", at);
      if (!max_tokens)
        return max_tokens.takeError();
      auto block_m = field(*o, "block_m", at);
      if (!block_m)
        return block_m.takeError();
      bucket.max_tokens = *max_tokens;
      bucket.config.block_m = static_cast<int>(*block_m);
      auto g1 = parse_tile(o->getObject("gemm1"), at + ".gemm1");
      if (!g1)
        return g1.takeError();
      auto g2 = parse_tile(o->getObject("gemm2"), at + ".gemm2");
      if (!g2)
        return g2.takeError();
      bucket.config.gemm1 = *g1;
      bucket.config.gemm2 = *g2;
      if (!entry.buckets.empty() && entry.buckets.back().max_tokens >= bucket.max_tokens)
        return make_error(Errc::invalid_argument,
                          "moe config table: {}: max_tokens must strictly increase", at);
      if (auto err = check_moe_config(entry.shape, bucket.config, entry.arch))
        return make_error(Errc::invalid_argument, "moe config table: {}: {}", at,
                          llvm::toString(std::move(err)));
      entry.buckets.push_back(bucket);
    }
    table.entries.push_back(std::move(entry));
  }
  return table;
}

llvm::json::Value moe_config_table_to_json(const MoeConfigTable& table) {
  llvm::json::Array entries;
  for (const MoeConfigEntry& entry : table.entries) {
    llvm::json::Array buckets;
    for (const MoeConfigBucket& b : entry.buckets)
      buckets.push_back(llvm::json::Object{{"max_tokens", b.max_tokens},
                                           {"block_m", b.config.block_m},
                                           {"gemm1", tile_json(b.config.gemm1)},
                                           {"gemm2", tile_json(b.config.gemm2)}});
    entries.push_back(llvm::json::Object{{"experts", entry.shape.experts},
                                         {"intermediate", entry.shape.intermediate},
                                         {"hidden", entry.shape.hidden},
                                         {"top_k", entry.shape.top_k},
                                         {"dtype", moe_dtype_name(entry.shape.dtype)},
                                         {"arch", entry.arch.name()},
                                         {"buckets", std::move(buckets)}});
  }
  return llvm::json::Object{{"version", 1}, {"entries", std::move(entries)}};
}

} // namespace specjit::ops
