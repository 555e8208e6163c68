// specjit inspect KEY|PATH: everything one entry knows about itself, and its raw cubin for
// cuobjdump / nvdisasm.
#include "cli.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace specjit::cli {
namespace {

struct Found {
  std::string path;
  std::optional<Digest128> key; // from the file name, checked against the header
};

// A path when such a file exists; otherwise a key, or a unique prefix of one, in the store.
llvm::Expected<Found> find_entry(const Context& context, const std::string& argument) {
  if (llvm::sys::fs::is_regular_file(argument)) {
    llvm::StringRef stem = llvm::sys::path::stem(argument);
    return Found{argument, Digest128::from_hex(stem)};
  }
  std::string prefix = llvm::StringRef(argument).lower();
  if (prefix.size() < 4 || !llvm::all_of(prefix, llvm::isHexDigit))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%s' is neither an entry file nor a key (32 hex digits, or a "
                                   "unique prefix of at least 4)",
                                   argument.c_str());
  cache::DiskStore store(store_options(context.config));
  std::vector<Found> matches;
  for (const cache::ListedEntry& entry : store.list())
    if (entry.key && llvm::StringRef(entry.key->hex()).startswith(prefix))
      matches.push_back({entry.location.path, entry.key});
  if (matches.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no entry with key %s in %s",
                                   argument.c_str(), store.options().root.c_str());
  if (matches.size() > 1 && matches[0].key != matches[1].key)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "key prefix %s is ambiguous (%zu entries)", argument.c_str(),
                                   matches.size());
  return matches.front(); // the root's copy comes first when a layer holds the same key
}

llvm::Error write_cubin(const std::string& path, llvm::StringRef cubin) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (!ec) {
    out << cubin;
    out.close();
    ec = out.error();
    out.clear_error();
  }
  if (ec)
    return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(), ec.message().c_str());
  return llvm::Error::success();
}

void print_entry(const Found& found, const cache::DecodedEntry& entry, uint64_t file_bytes) {
  const cache::EntryMetadata& meta = entry.metadata;
  const cache::CacheKeyInputs& inputs = meta.key_inputs;
  fmt::print("path:            {}\n", found.path);
  fmt::print("key:             {}\n", entry.key.hex());
  fmt::print("kernel:          {}\n", inputs.kernel);
  fmt::print("variant:         {}\n", variant_text(meta.variant));
  fmt::print("policies:        {}\n", variant_text(meta.policies));
  fmt::print("name expression: {}\n", inputs.name_expression);
  fmt::print("lowered name:    {}\n", meta.lowered_name);
  fmt::print("arch:            {}\n", inputs.arch.name());
  fmt::print("versions:        nvrtc {}, entry format {}, policy {}\n", inputs.nvrtc_version,
             inputs.format_version, inputs.policy_version);
  fmt::print("options:         {}\n", fmt::join(inputs.options, " "));
  fmt::print("source digest:   {}\n", inputs.source_digest.hex());
  fmt::print("resources:       {} registers, {} spill bytes, {} shared bytes\n", meta.registers,
             meta.spill_bytes, meta.shared_bytes);
  fmt::print("sizes:           cubin {}, file {}\n", format_bytes(entry.cubin.size()),
             format_bytes(file_bytes));
  fmt::print("compiled:        {} in {:.1f} ms\n", meta.created, meta.compile_ms);
  for (const std::string& warning : meta.warnings)
    fmt::print("warning:         {}\n", warning);
}

int run_inspect(Context& context) {
  auto found = find_entry(context, context.args.positional.front());
  if (!found)
    return report_error(context, found.takeError());
  auto buffer = llvm::MemoryBuffer::getFile(found->path, false, false);
  if (!buffer)
    return report_error(
        context, fmt::format("cannot read {}: {}", found->path, buffer.getError().message()));
  auto entry = cache::decode_entry((*buffer)->getBuffer(), found->key);
  if (!entry)
    return report_error(context, fmt::format("{} does not verify: {}", found->path,
                                             llvm::toString(entry.takeError())));
  if (auto cubin_path = context.args.value("--extract-cubin")) {
    if (auto err = write_cubin(*cubin_path, entry->cubin))
      return report_error(context, std::move(err));
    if (!context.json)
      fmt::print(stderr, "wrote the cubin ({}) to {}\n", format_bytes(entry->cubin.size()),
                 *cubin_path);
  }
  if (context.json) {
    print_json(llvm::json::Object{{"path", found->path},
                                  {"key", entry->key.hex()},
                                  {"cubin_bytes", static_cast<int64_t>(entry->cubin.size())},
                                  {"file_bytes", static_cast<int64_t>((*buffer)->getBufferSize())},
                                  {"metadata", cache::to_json(entry->metadata)}});
    return k_exit_ok;
  }
  print_entry(*found, *entry, (*buffer)->getBufferSize());
  return k_exit_ok;
}

} // namespace

std::vector<Command> inspect_commands() {
  return {{"inspect",
           "one entry's metadata, resources and versions; extract its cubin",
           "inspect KEY|PATH [--extract-cubin FILE] [--json]",
           "  KEY|PATH            an entry file, or a key (or a unique prefix of one)\n"
           "  --extract-cubin F   write the raw cubin to F (for cuobjdump -sass F)\n",
           "specjit inspect 3f2a9c --extract-cubin /tmp/k.cubin && cuobjdump -sass /tmp/k.cubin",
           {{"--extract-cubin", true, false}},
           1,
           1,
           run_inspect}};
}

} // namespace specjit::cli
