// Read and maintenance commands over the disk store: stats, ls, verify, prune, clear, config.
// (inspect is in inspect_command.cpp, export/import in transfer_commands.cpp.)
#include "cli.h"

#include <llvm/Support/FileSystem.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace specjit::cli {
namespace {

struct Tally {
  int64_t entries = 0;
  int64_t bytes = 0;
};

// Files in one of the root's bookkeeping folders (disk_store.h draws the tree). The store has
// no counter for them, so they are counted here.
int64_t count_files(const std::string& dir) {
  int64_t count = 0;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    count += it->type() != llvm::sys::fs::file_type::directory_file;
  return count;
}

std::string layer_path(const cache::StoreOptions& options, size_t layer) {
  return layer == 0 ? options.root : options.readonly_layers[layer - 1];
}

int run_stats(Context& context) {
  cache::DiskStore store(store_options(context.config));
  std::vector<cache::ListedEntry> entries = store.list();
  Tally total;
  int64_t undecodable = 0;
  std::map<size_t, Tally> layers;
  std::map<std::string, Tally> kernels;
  for (const cache::ListedEntry& entry : entries) {
    auto bytes = static_cast<int64_t>(entry.bytes);
    for (Tally* tally : {&total, &layers[entry.location.layer], &kernels[entry.kernel]}) {
      ++tally->entries;
      tally->bytes += bytes;
    }
    undecodable += !entry.metadata.has_value();
  }
  std::string base = store.options().root + "/v1";
  int64_t corrupt = count_files(base + "/corrupt"), temps = count_files(base + "/tmp");
  if (context.json) {
    llvm::json::Array layer_list, kernel_list;
    for (const auto& [layer, tally] : layers)
      layer_list.push_back(llvm::json::Object{{"layer", static_cast<int64_t>(layer)},
                                              {"path", layer_path(store.options(), layer)},
                                              {"entries", tally.entries},
                                              {"bytes", tally.bytes}});
    for (const auto& [kernel, tally] : kernels)
      kernel_list.push_back(llvm::json::Object{
          {"kernel", kernel}, {"entries", tally.entries}, {"bytes", tally.bytes}});
    print_json(llvm::json::Object{{"root", store.options().root},
                                  {"entries", total.entries},
                                  {"bytes", total.bytes},
                                  {"undecodable", undecodable},
                                  {"corrupt_quarantined", corrupt},
                                  {"temp_files", temps},
                                  {"writable", store.writable()},
                                  {"layers", std::move(layer_list)},
                                  {"kernels", std::move(kernel_list)}});
    return k_exit_ok;
  }
  fmt::print("cache root: {}{}\n", store.options().root,
             store.writable() ? "" : " (not writable: " + store.unusable_reason() + ")");
  fmt::print("entries: {} ({})\n", total.entries, format_bytes(total.bytes));
  for (const auto& [layer, tally] : layers)
    fmt::print("  layer {} {}: {} entries, {}\n", layer, layer_path(store.options(), layer),
               tally.entries, format_bytes(tally.bytes));
  for (const auto& [kernel, tally] : kernels)
    fmt::print("  kernel {}: {} entries, {}\n", kernel, tally.entries, format_bytes(tally.bytes));
  fmt::print("undecodable entries: {}\ncorrupt entries quarantined: {}\ntemp files: {}\n",
             undecodable, corrupt, temps);
  return k_exit_ok;
}

llvm::json::Object ls_row(const cache::ListedEntry& entry) {
  llvm::json::Object row{{"path", entry.location.path},
                         {"kernel", entry.kernel},
                         {"key", entry.key ? entry.key->hex() : ""},
                         {"bytes", static_cast<int64_t>(entry.bytes)},
                         {"layer", static_cast<int64_t>(entry.location.layer)},
                         {"last_use", entry.last_use_seconds}};
  if (!entry.metadata) {
    row["variant"] = nullptr;
    row["decodes"] = false;
    return row;
  }
  const cache::EntryMetadata& meta = *entry.metadata;
  llvm::json::Array warnings;
  for (const std::string& warning : meta.warnings)
    warnings.push_back(warning);
  row["variant"] = llvm::json::Object(meta.variant);
  row["arch"] = meta.key_inputs.arch.name();
  row["registers"] = meta.registers;
  row["spill_bytes"] = meta.spill_bytes;
  row["shared_bytes"] = meta.shared_bytes;
  row["compile_ms"] = meta.compile_ms;
  row["warnings"] = std::move(warnings);
  row["decodes"] = true;
  return row;
}

int run_ls(Context& context) {
  cache::DiskStore store(store_options(context.config));
  std::optional<std::string> kernel = context.args.value("--kernel");
  std::vector<cache::ListedEntry> entries =
      kernel ? store.list(llvm::StringRef(*kernel)) : store.list();
  if (context.json) {
    llvm::json::Array rows;
    for (const cache::ListedEntry& entry : entries)
      rows.push_back(ls_row(entry));
    print_json(llvm::json::Object{{"entries", std::move(rows)}});
    return k_exit_ok;
  }
  for (const cache::ListedEntry& entry : entries) {
    std::string key = entry.key ? entry.key->hex() : "?";
    if (!entry.metadata) {
      fmt::print("{}  {:<20} (does not decode) {}\n", key, entry.kernel, entry.location.path);
      continue;
    }
    const cache::EntryMetadata& meta = *entry.metadata;
    fmt::print("{}  {:<20} {} {} {:>9}  regs {} spill {} smem {}{}{}\n", key, entry.kernel,
               variant_text(meta.variant), meta.key_inputs.arch.name(), format_bytes(entry.bytes),
               meta.registers, meta.spill_bytes, meta.shared_bytes,
               meta.warnings.empty() ? "" : fmt::format("  {} warnings", meta.warnings.size()),
               entry.location.readonly() ? fmt::format("  [layer {}]", entry.location.layer) : "");
  }
  fmt::print("{} entries\n", entries.size());
  return k_exit_ok;
}

llvm::json::Array refused_layers_json(const cache::DiskStore& store) {
  llvm::json::Array list;
  for (const cache::RefusedLayer& layer : store.refused_layers())
    list.push_back(llvm::json::Object{{"layer", static_cast<int64_t>(layer.layer)},
                                      {"path", layer.path},
                                      {"reason", layer.reason}});
  return list;
}

void print_verify(const cache::DiskStore& store, size_t total,
                  const std::vector<cache::CorruptFinding>& bad, bool repair, bool repaired) {
  for (const cache::RefusedLayer& layer : store.refused_layers())
    fmt::print("refused: layer {} {}: {}\n", layer.layer, layer.path, layer.reason);
  for (const cache::CorruptFinding& finding : bad)
    fmt::print("bad: {}: {} ({}){}\n", finding.path, cache::entry_fault_name(finding.fault).str(),
               finding.detail, finding.moved_aside ? "; moved aside" : "");
  std::string outcome;
  if (repair && !bad.empty())
    outcome = repaired ? "; every bad root entry moved aside"
                       : store.writable() ? "; some could not be moved aside"
                                          : "; nothing moved: " + store.unusable_reason();
  fmt::print("{} entries verified, {} bad{}\n", total, bad.size(), outcome);
}

int run_verify(Context& context) {
  cache::DiskStore store(store_options(context.config));
  bool repair = context.args.has("--repair");
  size_t total = store.list().size();
  std::vector<cache::CorruptFinding> bad = store.verify(repair);
  // Only root findings can move; layer findings count as not repaired (they are read-only).
  bool repaired = repair && std::all_of(bad.begin(), bad.end(), [](const auto& finding) {
                    return finding.moved_aside;
                  });
  if (context.json) {
    llvm::json::Array list;
    for (const cache::CorruptFinding& finding : bad)
      list.push_back(llvm::json::Object{{"path", finding.path},
                                        {"reason", cache::entry_fault_name(finding.fault).str()},
                                        {"detail", finding.detail},
                                        {"moved_aside", finding.moved_aside}});
    print_json(llvm::json::Object{{"entries", static_cast<int64_t>(total)},
                                  {"bad", std::move(list)},
                                  {"refused_layers", refused_layers_json(store)},
                                  {"repaired", repair && !bad.empty() && repaired}});
  } else {
    print_verify(store, total, bad, repair, repaired);
  }
  return bad.empty() && store.refused_layers().empty() ? k_exit_ok : k_exit_problems;
}

int run_prune(Context& context) {
  std::optional<std::string> text = context.args.value("--max-size");
  if (!text)
    return usage_error(context, "--max-size SIZE is required");
  auto max_bytes = parse_size(*text);
  if (!max_bytes)
    return usage_error(context, llvm::toString(max_bytes.takeError()));
  cache::DiskStore store(store_options(context.config));
  cache::PruneResult result = store.prune(*max_bytes);
  // Done only when the root now fits; a root that cannot be written never does.
  bool fits = result.bytes_after <= *max_bytes;
  if (context.json) {
    print_json(llvm::json::Object{{"removed", static_cast<int64_t>(result.removed)},
                                  {"failed", static_cast<int64_t>(result.failed)},
                                  {"bytes_before", static_cast<int64_t>(result.bytes_before)},
                                  {"bytes_after", static_cast<int64_t>(result.bytes_after)},
                                  {"fits", fits}});
  } else {
    fmt::print("removed {} entries; {} -> {}\n", result.removed, format_bytes(result.bytes_before),
               format_bytes(result.bytes_after));
  }
  if (fits)
    return k_exit_ok;
  return report_error(context, fmt::format("the root still holds {} (limit {}){}{}",
                                           format_bytes(result.bytes_after),
                                           format_bytes(*max_bytes),
                                           result.failed ? fmt::format("; {} entries could not be "
                                                                       "removed", result.failed)
                                                         : "",
                                           store.writable() ? ""
                                                            : ": " + store.unusable_reason()));
}

int run_clear(Context& context) {
  cache::DiskStore store(store_options(context.config));
  cache::ClearResult result = store.clear();
  if (context.json)
    print_json(llvm::json::Object{{"removed", static_cast<int64_t>(result.removed)},
                                  {"failed", static_cast<int64_t>(result.failed)},
                                  {"writable", store.writable()}});
  else
    fmt::print("removed {} entries from {}\n", result.removed, store.options().root);
  if (!store.writable())
    return report_error(context, fmt::format("nothing removed: the cache root {} cannot be "
                                             "written: {}",
                                             store.options().root, store.unusable_reason()));
  if (result.failed)
    return report_error(context, fmt::format("{} entries could not be removed", result.failed));
  return k_exit_ok;
}

// The trust key's state without the key: "unset", "loaded", or why it cannot be used.
std::string trust_key_state(const cache::DiskStore& store) {
  if (!store.trust_key_configured())
    return "unset";
  return store.trust_key() ? "loaded" : "unusable: " + store.trust_key_error();
}

int run_config(Context& context) {
  std::vector<Config::Row> rows = context.config.describe();
  cache::DiskStore store(store_options(context.config));
  if (context.json) {
    llvm::json::Array list;
    for (const Config::Row& row : rows)
      list.push_back(llvm::json::Object{{"name", row.name},
                                        {"variable", row.variable},
                                        {"value", row.value},
                                        {"source", setting_source_name(row.source).str()}});
    print_json(llvm::json::Object{{"settings", std::move(list)},
                                  {"refused_layers", refused_layers_json(store)},
                                  {"trust_key", trust_key_state(store)}});
    return k_exit_ok;
  }
  for (const Config::Row& row : rows)
    fmt::print("{:<19} {:<28} {:<40} ({})\n", row.name, row.variable, row.value,
               setting_source_name(row.source).str());
  for (const cache::RefusedLayer& layer : store.refused_layers())
    fmt::print("refused layer {}: {}\n", layer.path, layer.reason);
  if (store.trust_key_configured())
    fmt::print("trust key: {}\n", trust_key_state(store));
  return k_exit_ok;
}

} // namespace

std::vector<Command> cache_commands() {
  return {
      {"stats",
       "entries and bytes per layer and kernel, quarantined entries, temp files",
       "stats [--json]",
       "",
       "specjit stats --json",
       {},
       0,
       0,
       run_stats},
      {"ls",
       "list cached variants with their resources",
       "ls [--kernel K] [--json]",
       "  --kernel K          only this kernel's entries\n",
       "specjit ls --kernel scale_tokens",
       {{"--kernel", true, false}},
       0,
       0,
       run_ls},
      {"verify",
       "fully verify every entry; exit 1 listing each bad one",
       "verify [--repair] [--json]",
       "  --repair            move bad entries of the root aside\n",
       "specjit verify --repair",
       {{"--repair", false, false}},
       0,
       0,
       run_verify},
      {"prune",
       "remove least recently used entries until the root fits a size",
       "prune --max-size SIZE [--json]",
       "  --max-size SIZE     e.g. 0, 512M, 10G (binary units)\n",
       "specjit prune --max-size 2G",
       {{"--max-size", true, false}},
       0,
       0,
       run_prune},
      {"clear",
       "remove every entry of the writable root",
       "clear [--json]",
       "",
       "specjit clear --cache-dir /tmp/specjit-cache",
       {},
       0,
       0,
       run_clear},
      {"config",
       "every setting, its value and where it came from",
       "config [--json]",
       "",
       "specjit config --cache-dir /var/cache/specjit",
       {},
       0,
       0,
       run_config},
  };
}

} // namespace specjit::cli
