// The whole-store operations of DiskStore: list, verify, prune, clear, sweep. They scan
// directories and may be slow; lookup and publish never call them (publish calls prune only
// when a size limit is set).
#include "cache/disk_store.h"

#include "cache/store_layout.h"
#include "support/logging.h"

#include <algorithm>
#include <cerrno>

namespace specjit::cache {

namespace {

std::optional<Digest128> key_from_file_name(llvm::StringRef name) {
  if (!name.consume_back(k_entry_suffix))
    return std::nullopt;
  return Digest128::from_hex(name);
}

// Fully verifies one entry file against the key its name claims (C2 catches copies).
std::optional<CorruptFinding> check_entry_file(const FileInfo& file) {
  std::optional<Digest128> key = key_from_file_name(file.name);
  if (!key)
    return CorruptFinding{file.path, EntryFault::key_mismatch, "file name is not a cache key",
                          false};
  ReadFile read = read_entry_file(file.path);
  switch (read.status) {
  case ReadStatus::missing:
  case ReadStatus::not_regular:
    return std::nullopt; // removed or replaced while we scanned; not an entry now
  case ReadStatus::io_error:
    return CorruptFinding{file.path, EntryFault::truncated,
                          "cannot be read: " + errno_text(read.err), false};
  case ReadStatus::too_large:
    return CorruptFinding{file.path, EntryFault::bad_lengths, "file is larger than any valid entry",
                          false};
  case ReadStatus::ok:
    break;
  }
  llvm::StringRef bytes(read.bytes->getBufferStart(), read.bytes->getBufferSize());
  llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, key);
  if (decoded)
    return std::nullopt;
  return finding_from(file.path, decoded.takeError());
}

ListedEntry describe(const Layer& layer, const FileInfo& file) {
  ListedEntry entry;
  entry.location = {file.path, layer.index};
  entry.kernel = file.dir_name;
  entry.key = key_from_file_name(file.name);
  entry.bytes = file.bytes;
  entry.last_use_seconds = file.mtime_ns / 1000000000;
  ReadFile read = read_entry_file(file.path);
  if (read.status != ReadStatus::ok)
    return entry;
  llvm::StringRef bytes(read.bytes->getBufferStart(), read.bytes->getBufferSize());
  llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, entry.key);
  if (!decoded) {
    llvm::consumeError(decoded.takeError()); // listed without metadata; verify() says why
    return entry;
  }
  entry.kernel = decoded->metadata.key_inputs.kernel; // the real id, not the directory name
  entry.metadata = std::move(decoded->metadata);
  return entry;
}

} // namespace

std::vector<ListedEntry> DiskStore::list(std::optional<llvm::StringRef> kernel) const {
  std::vector<std::pair<int64_t, ListedEntry>> found;
  for (const Layer& layer : readable_layers(m_options, root_readable()))
    for (const FileInfo& file : scan_entries(layer.paths, kernel))
      found.emplace_back(file.mtime_ns, describe(layer, file));
  // Newest use first; ties keep layer order (root before base layers).
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<ListedEntry> listed;
  listed.reserve(found.size());
  for (auto& [mtime, entry] : found)
    listed.push_back(std::move(entry));
  return listed;
}

std::vector<CorruptFinding> DiskStore::verify(bool repair) {
  std::vector<CorruptFinding> findings;
  for (const Layer& layer : readable_layers(m_options, root_readable())) {
    for (const FileInfo& file : scan_entries(layer.paths, std::nullopt)) {
      std::optional<CorruptFinding> finding = check_entry_file(file);
      if (!finding)
        continue;
      if (repair && layer.index == 0)
        finding->moved_aside = quarantine(EntryLocation{file.path, 0});
      findings.push_back(std::move(*finding));
    }
  }
  return findings;
}

PruneResult DiskStore::prune(uint64_t max_bytes) {
  PruneResult result;
  if (!root_readable())
    return result;
  std::vector<FileInfo> files = scan_entries(LayerPaths(m_options.root), std::nullopt);
  // Least recently used first: mtime is the last-use stamp (refreshed by hits), never atime.
  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
  });
  uint64_t total = 0;
  for (const FileInfo& file : files)
    total += file.bytes;
  result.bytes_before = total;
  for (const FileInfo& file : files) {
    if (total <= max_bytes || !writable())
      break;
    // Unlink only: a reader holding the file open keeps reading the complete old bytes.
    int err = unlink_path(file.path);
    if (err == 0)
      ++result.removed;
    if (err == 0 || err == ENOENT) // ENOENT: another process pruned it first
      total -= file.bytes;
  }
  result.bytes_after = total;
  return result;
}

size_t DiskStore::clear() {
  if (!writable())
    return 0;
  LayerPaths root(m_options.root);
  size_t removed = 0;
  for (const FileInfo& file : scan_entries(root, std::nullopt))
    if (unlink_path(file.path) == 0)
      ++removed;
  std::vector<std::string> kernel_dirs;
  if (list_directory(root.entries(), kernel_dirs) == 0)
    for (const std::string& name : kernel_dirs)
      (void)remove_directory(root.entries() + "/" + name); // only succeeds when empty
  for (const std::string& dir : {root.tmp(), root.corrupt(), root.locks(), root.deps()})
    for (const FileInfo& file : scan_files(dir))
      (void)unlink_path(file.path);
  return removed;
}

size_t DiskStore::sweep_stale_temps() {
  if (!writable())
    return 0;
  // By age only: a process id says nothing across pid namespaces (containers sharing a cache).
  int64_t cutoff = now_ns() - std::max<int64_t>(m_options.stale_temp_seconds, 0) * 1000000000;
  size_t swept = 0;
  for (const FileInfo& file : scan_files(LayerPaths(m_options.root).tmp()))
    if (file.mtime_ns < cutoff && unlink_path(file.path) == 0)
      ++swept;
  return swept;
}

} // namespace specjit::cache
