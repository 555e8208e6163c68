// export / import: move cache entries between roots as one portable file (docs/export-format.md)
//
//   file   := magic[8] = "SPJTEXPT"  version : u32 (= 1)  reserved : u32 (= 0)  count : u64
//             record{count}
//   record := kernel_size : u32  kernel[kernel_size]  entry_size : u64  entry[entry_size]
//
// Integers are little-endian. An entry is the entry file's bytes, unchanged (entry_format.h),
// so it carries its own key and checksum: import verifies each one and publishes it under the
// key in its header, never under a name the export file chose.
#include "cli.h"

#include "support/bounded_file.h"

#include <llvm/Support/Endian.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <set>

namespace specjit::cli {
namespace {

constexpr llvm::StringLiteral k_magic = "SPJTEXPT";
constexpr uint32_t k_export_version = 1;
constexpr size_t k_file_header_size = 24;
constexpr uint32_t k_max_kernel_size = 4096;

struct Record {
  std::string kernel;
  llvm::StringRef entry; // views into the imported file
};

void put_u32(std::string& out, uint32_t value) {
  char bytes[4];
  llvm::support::endian::write32le(bytes, value);
  out.append(bytes, 4);
}

void put_u64(std::string& out, uint64_t value) {
  char bytes[8];
  llvm::support::endian::write64le(bytes, value);
  out.append(bytes, 8);
}

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
  std::string records;
  uint64_t count = 0;
  size_t bad = 0;
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
    if (!seen.insert(decoded->key.hex()).second)
      continue;
    put_u32(records, static_cast<uint32_t>(entry.kernel.size()));
    records += entry.kernel;
    put_u64(records, (*buffer)->getBufferSize());
    records += (*buffer)->getBuffer();
    ++count;
  }
  std::string bytes(k_magic.data(), k_magic.size());
  put_u32(bytes, k_export_version);
  put_u32(bytes, 0);
  put_u64(bytes, count);
  bytes += records;
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

// Splits an export file into records; every length is checked against what remains, so a
// truncated or hostile file cannot make it read out of bounds or allocate without limit.
llvm::Expected<std::vector<Record>> read_records(llvm::StringRef bytes, const std::string& file) {
  auto fail = [&](const std::string& what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s", file.c_str(),
                                   what.c_str());
  };
  if (bytes.size() < k_file_header_size || !bytes.startswith(k_magic))
    return fail("not a specjit export file (bad magic)");
  uint32_t version = llvm::support::endian::read32le(bytes.data() + 8);
  if (version != k_export_version)
    return fail(fmt::format("export format version {} is not supported (this build reads {})",
                            version, k_export_version));
  uint64_t count = llvm::support::endian::read64le(bytes.data() + 16);
  llvm::StringRef rest = bytes.drop_front(k_file_header_size);
  if (count > rest.size() / 12)
    return fail(fmt::format("claims {} entries, more than its size allows", count));
  std::vector<Record> records;
  for (uint64_t i = 0; i < count; ++i) {
    if (rest.size() < 4)
      return fail(fmt::format("truncated in record {}", i));
    uint32_t kernel_size = llvm::support::endian::read32le(rest.data());
    rest = rest.drop_front(4);
    if (kernel_size > k_max_kernel_size || rest.size() < kernel_size + 8ull)
      return fail(fmt::format("truncated or bad kernel name in record {}", i));
    std::string kernel = rest.take_front(kernel_size).str();
    rest = rest.drop_front(kernel_size);
    uint64_t entry_size = llvm::support::endian::read64le(rest.data());
    rest = rest.drop_front(8);
    if (entry_size > rest.size() || entry_size > cache::k_max_entry_bytes)
      return fail(fmt::format("truncated or bad entry length in record {}", i));
    records.push_back({std::move(kernel), rest.take_front(entry_size)});
    rest = rest.drop_front(entry_size);
  }
  if (!rest.empty())
    return fail(fmt::format("{} trailing bytes after the last record", rest.size()));
  return records;
}

int run_import(Context& context) {
  const std::string& file = context.args.positional.front();
  auto bundle = read_regular_file(file, "bundle", k_max_bundle_bytes);
  if (!bundle)
    return report_error(context, bundle.takeError());
  auto records = read_records(*bundle, file);
  if (!records)
    return report_error(context, records.takeError());
  cache::DiskStore store(store_options(context.config));
  if (!store.writable())
    return report_error(context, fmt::format("the cache root {} cannot be written: {}",
                                             store.options().root, store.unusable_reason()));
  size_t imported = 0;
  llvm::json::Array bad;
  for (size_t i = 0; i < records->size(); ++i) {
    const Record& record = (*records)[i];
    auto decoded = cache::decode_entry(record.entry, std::nullopt);
    llvm::Error problem = llvm::Error::success();
    if (!decoded)
      problem = decoded.takeError();
    else if (decoded->metadata.key_inputs.kernel != record.kernel)
      problem = llvm::createStringError(
          llvm::inconvertibleErrorCode(), "names kernel '%s' but holds an entry of '%s'",
          record.kernel.c_str(), decoded->metadata.key_inputs.kernel.c_str());
    else
      problem = store.publish(decoded->key, record.kernel, record.entry);
    if (!problem) {
      ++imported;
      continue;
    }
    std::string message = llvm::toString(std::move(problem));
    if (!context.json)
      fmt::print(stderr, "record {} ({}): {}\n", i, record.kernel, message);
    bad.push_back(llvm::json::Object{
        {"record", static_cast<int64_t>(i)}, {"kernel", record.kernel}, {"reason", message}});
  }
  size_t failures = bad.size();
  if (context.json)
    print_json(llvm::json::Object{
        {"file", file}, {"imported", static_cast<int64_t>(imported)}, {"bad", std::move(bad)}});
  else
    fmt::print("imported {} of {} entries into {}\n", imported, records->size(),
               store.options().root);
  return failures == 0 ? k_exit_ok : k_exit_problems;
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
