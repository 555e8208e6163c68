// export / import: move cache entries between roots as one portable file (cache/export_format.h,
// docs/export-format.md). Import verifies each entry and publishes it under the key in its
// header, never under a name the export file chose; with a trust key it refuses a record without
// a valid tag, and it never replaces a verified entry of the root with different bytes.
#include "cli.h"

#include "cache/export_format.h"

#include "support/bounded_file.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <set>

namespace specjit::cli {
namespace {

// Writes next to the destination, then renames: a reader never sees half an export.
llvm::Error write_atomically(const std::string& path, llvm::StringRef bytes) {
  int fd = -1;
  llvm::SmallString<256> temp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, temp))
    return llvm::createStringError(ec, "cannot create %s: %s", path.c_str(), ec.message().c_str());
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << bytes;
    out.close();
    if (out.has_error()) {
      std::error_code ec = out.error();
      out.clear_error(); // else raw_fd_ostream reports a fatal error when destroyed
      llvm::sys::fs::remove(temp);
      return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(), ec.message().c_str());
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(), ec.message().c_str());
  }
  return llvm::Error::success();
}

int run_export(Context& context) {
  const std::string& file = context.args.positional.front();
  cache::DiskStore store(store_options(context.config));
  std::optional<std::string> kernel = context.args.value("--kernel");
  cache::ExportWriter writer;
  size_t bad = 0;
  const cache::TrustKey* trust = store.trust_key();
  if (store.trust_key_configured() && trust == nullptr)
    return report_error(context, "cannot tag the export: " + store.trust_key_error());
  std::set<std::string> seen; // a key in the root shadows the same key in a base layer
  for (const cache::ListedEntry& entry :
       kernel ? store.list(llvm::StringRef(*kernel)) : store.list()) {
    auto buffer = llvm::MemoryBuffer::getFile(entry.location.path, false, false);
    if (!buffer) {
      warn(context,
           fmt::format("skipped {}: {}", entry.location.path, buffer.getError().message()));
      ++bad;
      continue;
    }
    auto decoded = cache::decode_entry((*buffer)->getBuffer(), entry.key);
    if (!decoded) {
      warn(context,
           fmt::format("skipped {}: {}", entry.location.path, llvm::toString(decoded.takeError())));
      ++bad;
      continue;
    }
    if (auto problem =
            store.layer_entry_problem(entry.location, decoded->key, (*buffer)->getBuffer())) {
      warn(context, fmt::format("skipped {}: untrusted: {}", entry.location.path, *problem));
      ++bad;
      continue;
    }
    if (!seen.insert(decoded->key.hex()).second)
      continue;
    // With a trust key every record carries the entry's tag.
    const llvm::StringRef bytes = (*buffer)->getBuffer();
    if (trust != nullptr)
      writer.add(entry.kernel, bytes, cache::compute_tag(*trust, decoded->key, bytes));
    else
      writer.add(entry.kernel, bytes);
  }
  const uint64_t count = writer.count();
  const std::string bytes = writer.file();
  if (auto err = write_atomically(file, bytes))
    return report_error(context, std::move(err));
  if (context.json)
    print_json(llvm::json::Object{{"file", file},
                                  {"exported", static_cast<int64_t>(count)},
                                  {"bytes", static_cast<int64_t>(bytes.size())},
                                  {"skipped", static_cast<int64_t>(bad)}});
  else
    fmt::print("exported {} entries ({}) to {}{}\n", count, format_bytes(bytes.size()), file,
               bad ? fmt::format("; {} bad entries skipped", bad) : "");
  return bad == 0 ? k_exit_ok : k_exit_problems;
}

// What happened to one record.
enum class Outcome { imported, unchanged, conflict, bad };

struct ImportReport {
  size_t imported = 0, unchanged = 0;
  llvm::json::Array bad, conflicts;
};

// Why a record must not be published, before looking at the root: it does not verify, names
// another kernel, or (with a key) carries no valid tag.
llvm::Error record_problem(const cache::ExportRecord& record,
                           llvm::Expected<cache::DecodedEntry>& decoded,
                           const cache::DiskStore& store) {
  if (!decoded)
    return decoded.takeError();
  if (decoded->metadata.key_inputs.kernel != record.kernel)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(), "names kernel '%s' but holds an entry of '%s'",
        record.kernel.c_str(), decoded->metadata.key_inputs.kernel.c_str());
  if (!store.trust_key_configured())
    return llvm::Error::success();
  llvm::ArrayRef<uint8_t> tag(reinterpret_cast<const uint8_t*>(record.tag.data()),
                              record.tag.size());
  if (record.tag.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "untrusted: the record carries no tag");
  if (!cache::verify_tag(*store.trust_key(), decoded->key, record.entry, tag))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "untrusted: the tag does not verify under the configured key");
  return llvm::Error::success();
}

Outcome import_record(cache::DiskStore& store, const cache::ExportRecord& record,
                      std::string& message, std::string& key_hex) {
  auto decoded = cache::decode_entry(record.entry, std::nullopt);
  if (llvm::Error problem = record_problem(record, decoded, store)) {
    message = llvm::toString(std::move(problem));
    return Outcome::bad;
  }
  key_hex = decoded->key.hex();
  if (std::optional<cache::LoadedEntry> existing = store.root_entry(decoded->key, record.kernel)) {
    if (existing->bytes->getBuffer() == record.entry)
      return Outcome::unchanged;
    message = fmt::format("conflict: {} already holds a verified entry of this key with "
                          "different bytes; kept it",
                          existing->location.path);
    return Outcome::conflict;
  }
  if (llvm::Error problem = store.publish(decoded->key, record.kernel, record.entry)) {
    message = llvm::toString(std::move(problem));
    return Outcome::bad;
  }
  return Outcome::imported;
}

void print_import(const Context& context, const ImportReport& report, const std::string& file,
                  size_t records, const std::string& root) {
  if (context.json) {
    print_json(llvm::json::Object{{"file", file},
                                  {"imported", static_cast<int64_t>(report.imported)},
                                  {"unchanged", static_cast<int64_t>(report.unchanged)},
                                  {"conflicts", llvm::json::Array(report.conflicts)},
                                  {"bad", llvm::json::Array(report.bad)}});
    return;
  }
  fmt::print("imported {} of {} entries into {}{}{}\n", report.imported, records, root,
             report.unchanged ? fmt::format("; {} already there", report.unchanged) : "",
             report.conflicts.empty()
                 ? ""
                 : fmt::format("; {} conflicts (existing entries kept)", report.conflicts.size()));
}

int run_import(Context& context) {
  const std::string& file = context.args.positional.front();
  auto bundle = read_regular_file(file, "bundle", k_max_bundle_bytes);
  if (!bundle)
    return report_error(context, bundle.takeError());
  auto records = cache::decode_export(*bundle);
  if (!records)
    return report_error(context, fmt::format("{}: {}", file, llvm::toString(records.takeError())));
  cache::DiskStore store(store_options(context.config));
  if (!store.writable())
    return report_error(context, fmt::format("the cache root {} cannot be written: {}",
                                             store.options().root, store.unusable_reason()));
  if (store.trust_key_configured() && store.trust_key() == nullptr)
    return report_error(context, "nothing imported: " + store.trust_key_error());
  ImportReport report;
  for (size_t i = 0; i < records->size(); ++i) {
    const cache::ExportRecord& record = (*records)[i];
    std::string message, key;
    Outcome outcome = import_record(store, record, message, key);
    report.imported += outcome == Outcome::imported;
    report.unchanged += outcome == Outcome::unchanged;
    if (outcome == Outcome::imported || outcome == Outcome::unchanged)
      continue;
    if (!context.json)
      fmt::print(stderr, "record {} ({}): {}\n", i, record.kernel, message);
    llvm::json::Object row{
        {"record", static_cast<int64_t>(i)}, {"kernel", record.kernel}, {"reason", message}};
    if (outcome == Outcome::conflict) {
      row["key"] = key;
      report.conflicts.push_back(std::move(row));
    } else {
      report.bad.push_back(std::move(row));
    }
  }
  print_import(context, report, file, records->size(), store.options().root);
  return report.bad.empty() && report.conflicts.empty() ? k_exit_ok : k_exit_problems;
}

} // namespace

std::vector<Command> transfer_commands() {
  return {
      {"export",
       "write cache entries into one portable file",
       "export FILE [--kernel K] [--json]",
       "  --kernel K          only this kernel's entries\n",
       "specjit export /tmp/kernels.sjx && specjit import /tmp/kernels.sjx --cache-dir /opt/cache",
       {{"--kernel", true, false}},
       1,
       1,
       run_export},
      {"import",
       "verify and publish every entry of an export file under its own key",
       "import FILE [--json]",
       "",
       "specjit import kernels.sjx --cache-dir /opt/specjit-cache",
       {},
       1,
       1,
       run_import},
  };
}

} // namespace specjit::cli
