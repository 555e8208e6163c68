// The tuned configuration table's JSON (format in ops/moe/config.h): parsing, with every error
// naming its place in the file, and writing (what `specjit-bench moe --tune` saves).
#include "ops/moe/config.h"

#include "support/error.h"

#include <fmt/format.h>

namespace specjit::ops {

namespace {

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
    for (auto [flag, name] :
         {std::pair{&tile.f16_tokens, "f16_tokens"}, std::pair{&tile.e4m3, "e4m3"},
          std::pair{&tile.whole_k, "whole_k"}, std::pair{&tile.sorted_tokens, "sorted_tokens"}}) {
      if (object->get(name) == nullptr)
        continue;
      auto value = object->getBoolean(name);
      if (!value)
        return make_error(Errc::invalid_argument, "moe config table: {}: '{}' must be a boolean",
                          where.str(), name);
      *flag = *value;
    }
    // Packed weights' reads: "reads": "bulk" or "map" (absent: the rule's).
    if (const llvm::json::Value* reads = object->get("reads")) {
      const auto name = reads->getAsString();
      auto named = [&](MoePackedReads r) { return name && *name == moe_packed_reads_name(r); };
      if (named(MoePackedReads::bulk))
        tile.packed_reads = MoePackedReads::bulk;
      else if (named(MoePackedReads::tensor_map))
        tile.packed_reads = MoePackedReads::tensor_map;
      else
        return make_error(Errc::invalid_argument,
                          "moe config table: {}: reads must be \"bulk\" or \"map\"", where.str());
    }
    // The schedule: "stream_k": true or "dynamic": true (neither: fixed).
    for (auto [schedule, name] : {std::pair{MoeSchedule::stream_k, "stream_k"},
                                  std::pair{MoeSchedule::dynamic, "dynamic"}}) {
      if (object->get(name) == nullptr)
        continue;
      auto value = object->getBoolean(name);
      if (!value)
        return make_error(Errc::invalid_argument, "moe config table: {}: '{}' must be a boolean",
                          where.str(), name);
      if (!*value)
        continue;
      if (tile.persistent())
        return make_error(Errc::invalid_argument,
                          "moe config table: {}: stream_k and dynamic are two schedules: pick one",
                          where.str());
      tile.schedule = schedule;
    }
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
    if (t.stream_k())
      o["stream_k"] = true;
    if (t.dynamic())
      o["dynamic"] = true;
    if (t.f16_tokens)
      o["f16_tokens"] = true;
    if (t.e4m3)
      o["e4m3"] = true;
    if (t.whole_k)
      o["whole_k"] = true;
    if (t.sorted_tokens)
      o["sorted_tokens"] = true;
    if (t.packed_reads != MoePackedReads::automatic)
      o["reads"] = moe_packed_reads_name(t.packed_reads);
    return o;
  }
  return llvm::json::Object{
      {"block_n", t.block_n}, {"warps_m", t.warps_m}, {"warps_n", t.warps_n}, {"stages", t.stages}};
}

// One bucket: max_tokens, block_m and the two GEMM tiles, checked against the entry's shape.
llvm::Expected<MoeConfigBucket> parse_bucket(const llvm::json::Object& o,
                                             const MoeConfigEntry& entry, const std::string& at) {
  MoeConfigBucket bucket;
  auto max_tokens = field(o, "max_tokens", at);
  if (!max_tokens)
    return max_tokens.takeError();
  auto block_m = field(o, "block_m", at);
  if (!block_m)
    return block_m.takeError();
  bucket.max_tokens = *max_tokens;
  bucket.config.block_m = static_cast<int>(*block_m);
  auto g1 = parse_tile(o.getObject("gemm1"), at + ".gemm1");
  if (!g1)
    return g1.takeError();
  auto g2 = parse_tile(o.getObject("gemm2"), at + ".gemm2");
  if (!g2)
    return g2.takeError();
  bucket.config.gemm1 = *g1;
  bucket.config.gemm2 = *g2;
  if (entry.weights != MoeWeightLayout::packed && (g1->packed_reads != MoePackedReads::automatic ||
                                                   g2->packed_reads != MoePackedReads::automatic))
    return make_error(Errc::invalid_argument,
                      "moe config table: {}: reads is for the tiles of a packed entry "
                      "(\"weights\": \"packed\")",
                      at);
  if (auto err = check_moe_config(entry.shape, bucket.config, entry.arch))
    return make_error(Errc::invalid_argument, "moe config table: {}: {}", at,
                      llvm::toString(std::move(err)));
  return bucket;
}

// One entry: the shape, dtype and arch it applies to, the device it was tuned on (optional: any
// device of the arch), the weights' layout it was tuned on (optional, row_major), then its
// buckets in increasing order.
llvm::Expected<MoeConfigEntry> parse_entry(const llvm::json::Object& e, const std::string& where) {
  MoeConfigEntry entry;
  int64_t* targets[] = {&entry.shape.experts, &entry.shape.intermediate, &entry.shape.hidden,
                        &entry.shape.top_k};
  const char* names[] = {"experts", "intermediate", "hidden", "top_k"};
  for (int f = 0; f < 4; ++f) {
    auto value = field(e, names[f], where);
    if (!value)
      return value.takeError();
    *targets[f] = *value;
  }
  auto dtype = e.getString("dtype");
  if (!dtype || (*dtype != "fp8" && *dtype != "bf16"))
    return make_error(Errc::invalid_argument, "moe config table: {}: dtype must be fp8 or bf16",
                      where);
  entry.shape.dtype = *dtype == "fp8" ? MoeDType::fp8 : MoeDType::bf16;
  auto arch = Arch::parse(e.getString("arch").getValueOr(""));
  if (!arch)
    return make_error(Errc::invalid_argument, "moe config table: {}: {}", where,
                      llvm::toString(arch.takeError()));
  entry.arch = *arch;
  if (const llvm::json::Value* device = e.get("device")) {
    auto name = device->getAsString();
    if (!name || name->empty())
      return make_error(Errc::invalid_argument,
                        "moe config table: {}: device must be a device's name, e.g. "
                        "\"NVIDIA H200\"",
                        where);
    entry.device = name->str();
  }
  if (const llvm::json::Value* weights = e.get("weights")) {
    auto name = weights->getAsString();
    auto layout = name ? parse_moe_weight_layout(*name) : std::nullopt;
    if (!layout)
      return make_error(Errc::invalid_argument,
                        "moe config table: {}: weights must be row_major or packed", where);
    entry.weights = *layout;
  }
  const llvm::json::Array* buckets = e.getArray("buckets");
  if (buckets == nullptr || buckets->empty())
    return make_error(Errc::invalid_argument, "moe config table: {}: no buckets", where);
  for (size_t b = 0; b < buckets->size(); ++b) {
    const std::string at = fmt::format("{}.buckets[{}]", where, b);
    const llvm::json::Object* o = (*buckets)[b].getAsObject();
    if (o == nullptr)
      return make_error(Errc::invalid_argument, "moe config table: {}: expected an object", at);
    auto bucket = parse_bucket(*o, entry, at);
    if (!bucket)
      return bucket.takeError();
    if (!entry.buckets.empty() && entry.buckets.back().max_tokens >= bucket->max_tokens)
      return make_error(Errc::invalid_argument,
                        "moe config table: {}: max_tokens must strictly increase", at);
    entry.buckets.push_back(*bucket);
  }
  return entry;
}

} // namespace

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
    auto entry = parse_entry(*e, where);
    if (!entry)
      return entry.takeError();
    table.entries.push_back(std::move(*entry));
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
    llvm::json::Object e{{"experts", entry.shape.experts},
                         {"intermediate", entry.shape.intermediate},
                         {"hidden", entry.shape.hidden},
                         {"top_k", entry.shape.top_k},
                         {"dtype", moe_dtype_name(entry.shape.dtype)},
                         {"arch", entry.arch.name()},
                         {"buckets", std::move(buckets)}};
    if (entry.weights != MoeWeightLayout::row_major) // row-major tables stay as they were
      e["weights"] = moe_weight_layout_name(entry.weights);
    if (!entry.device.empty())
      e["device"] = entry.device;
    entries.push_back(std::move(e));
  }
  return llvm::json::Object{{"version", 1}, {"entries", std::move(entries)}};
}

} // namespace specjit::ops
