// The whole-store operations of DiskStore: list, verify, prune, clear, sweep. They scan
// directories and may be slow; lookup and publish never call them (publish calls prune only
// when a size limit is set).
#include "cache/disk_store.h"

#include "cache/dir_handle.h"
#include "cache/store_layout.h"
#include "support/logging.h"

#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <map>

namespace specjit::cache {

namespace {

std::optional<Digest128> key_from_file_name(llvm::StringRef name) {
  if (!name.consume_back(k_entry_suffix))
    return std::nullopt;
  return Digest128::from_hex(name);
}

// Fully verifies one entry file against the key its name claims (C2 catches copies). A link,
// directory or special file under an entry's name is a finding too: it would be a miss forever.
// With `trust` (read-only layers), the entry's tag must verify too.
std::optional<CorruptFinding> check_entry_at(const DirHandle& dir, const std::string& name,
                                             const DiskStore* trust) {
  std::string path = dir.path_of(name);
  std::optional<Digest128> key = key_from_file_name(name);
  if (!key)
    return CorruptFinding{path, EntryFault::key_mismatch, "file name is not a cache key", false};
  ReadFile read = read_entry_at(dir, name);
  switch (read.status) {
  case ReadStatus::missing:
    return std::nullopt; // removed while we scanned; not an entry now
  case ReadStatus::not_regular:
    return CorruptFinding{path, EntryFault::not_a_file,
                          "a link, directory or special file where an entry should be", false};
  case ReadStatus::io_error:
    return CorruptFinding{path, EntryFault::truncated, "cannot be read: " + errno_text(read.err),
                          false};
  case ReadStatus::too_large:
    return CorruptFinding{path, EntryFault::bad_lengths, "file is larger than any valid entry",
                          false};
  case ReadStatus::ok:
    break;
  }
  llvm::StringRef bytes(read.bytes->getBufferStart(), read.bytes->getBufferSize());
  llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, key);
  if (!decoded)
    return finding_from(path, decoded.takeError());
  if (trust)
    if (std::optional<std::string> problem = tag_problem(*trust, dir, *key, bytes))
      return CorruptFinding{path, EntryFault::untrusted, *problem, false};
  return std::nullopt;
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
  for (const Layer& layer : readable_layers(m_options, root_readable(), m_refused_layers))
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
  for (const Layer& layer : readable_layers(m_options, root_readable(), m_refused_layers))
    verify_layer(layer, repair && layer.index == 0 && writable(), findings);
  return findings;
}

namespace {

bool is_entry_name(llvm::StringRef name) { return name.endswith(k_entry_suffix); }

} // namespace

void DiskStore::verify_layer(const Layer& layer, bool repair,
                             std::vector<CorruptFinding>& findings) {
  KernelDir top = open_kernel_dir(layer.root, layer.owners, "_", /*create=*/false);
  if (!top.entries.valid())
    return; // nothing published there yet (or refused at construction)
  std::vector<std::string> kernel_dirs;
  if (list_directory_fd(top.entries.fd(), top.entries.path(), kernel_dirs) != 0)
    return;
  std::sort(kernel_dirs.begin(), kernel_dirs.end());
  for (const std::string& dir_name : kernel_dirs) {
    OpenedDir kernel = top.entries.open_child(dir_name, false, layer.owners);
    if (kernel.status == OpenStatus::missing)
      continue;
    if (kernel.status != OpenStatus::ok) {
      CorruptFinding finding{top.entries.path_of(dir_name), EntryFault::not_a_file,
                             kernel.reason, false};
      finding.moved_aside = repair && move_aside(top.entries, dir_name);
      findings.push_back(std::move(finding));
      continue;
    }
    std::vector<std::string> names;
    if (list_directory_fd(kernel.dir.fd(), kernel.dir.path(), names) != 0)
      continue;
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (!is_entry_name(name))
        continue;
      std::optional<CorruptFinding> finding =
          check_entry_at(kernel.dir, name, layer.index == 0 ? nullptr : this);
      if (!finding)
        continue;
      finding->moved_aside = repair && move_aside(kernel.dir, name);
      findings.push_back(std::move(*finding));
    }
  }
}

namespace {

// The root's kernel directories, each opened (and checked) once per maintenance pass.
class KernelDirCache {
public:
  explicit KernelDirCache(const std::string& root) : m_root(root) {}
  const DirHandle* get(const std::string& dir_name) {
    auto [it, inserted] = m_dirs.try_emplace(dir_name);
    if (inserted)
      it->second = open_kernel_dir(m_root, OwnerRule::self, dir_name, false).kernel;
    return it->second.valid() ? &it->second : nullptr;
  }

private:
  std::string m_root;
  std::map<std::string, DirHandle> m_dirs;
};

// Unlinks an entry and its tag (never following a link). 0, or the errno of the entry.
int remove_entry(KernelDirCache& dirs, const FileInfo& file) {
  const DirHandle* dir = dirs.get(file.dir_name);
  if (dir == nullptr)
    return ENOENT;
  int err = unlink_at(dir->fd(), file.name, file.path, 0);
  std::string tag = llvm::StringRef(file.name).drop_back(k_entry_suffix.size()).str() +
                    k_tag_suffix.str();
  (void)unlink_at(dir->fd(), tag, dir->path_of(tag), 0);
  return err;
}

// Regular files directly in <root>/logs; links and other things are not followed or counted.
uint64_t logs_bytes(const std::string& root) {
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root + "/logs", ec, /*follow_symlinks=*/false), end;
       !ec && it != end; it.increment(ec)) {
    llvm::ErrorOr<llvm::sys::fs::basic_file_status> status = it->status();
    if (status && status->type() == llvm::sys::fs::file_type::regular_file)
      total += status->getSize();
  }
  return total;
}

} // namespace

PruneResult DiskStore::prune(uint64_t max_bytes) {
  PruneResult result;
  if (!root_readable())
    return result;
  std::vector<FileInfo> files = scan_entries(LayerPaths(m_options.root), std::nullopt);
  // Least recently used first: mtime is the last-use stamp (refreshed by hits), never atime.
  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
  });
  // The recompilation log under <root>/logs counts toward the limit (it is never evicted: it
  // rotates at its own limit, runtime/event_log.h), so entries make room for it.
  uint64_t total = logs_bytes(m_options.root);
  for (const FileInfo& file : files)
    total += file.bytes;
  result.bytes_before = total;
  KernelDirCache dirs(m_options.root);
  for (const FileInfo& file : files) {
    if (total <= max_bytes || !writable())
      break;
    // Unlink only: a reader holding the file open keeps reading the complete old bytes.
    int err = remove_entry(dirs, file);
    if (err == 0)
      ++result.removed;
    else if (err != ENOENT) // ENOENT: another process pruned it first
      ++result.failed;
    if (err == 0 || err == ENOENT)
      total -= file.bytes;
  }
  result.bytes_after = total;
  return result;
}

ClearResult DiskStore::clear() {
  ClearResult result;
  if (!writable())
    return result;
  KernelDirCache dirs(m_options.root);
  for (const FileInfo& file : scan_entries(LayerPaths(m_options.root), std::nullopt)) {
    int err = remove_entry(dirs, file);
    result.removed += err == 0;
    result.failed += err != 0 && err != ENOENT;
  }
  KernelDir top = open_kernel_dir(m_options.root, OwnerRule::self, "_", false);
  std::vector<std::string> kernel_dirs;
  if (top.entries.valid() &&
      list_directory_fd(top.entries.fd(), top.entries.path(), kernel_dirs) == 0)
    for (const std::string& name : kernel_dirs) {
      if (const DirHandle* dir = dirs.get(name))
        for (const FileInfo& file : scan_files(dir->path()))
          (void)unlink_at(dir->fd(), file.name, file.path, 0); // tags and strays
      // Only succeeds when empty; never removes through a link (unlinkat on the name).
      (void)unlink_at(top.entries.fd(), name, top.entries.path_of(name), AT_REMOVEDIR);
    }
  for (llvm::StringRef sub : {"tmp", "corrupt", "locks", "deps", "hints"}) {
    llvm::Expected<DirHandle> dir = open_root_subdir(m_options.root, sub);
    if (!dir) {
      llvm::consumeError(dir.takeError());
      continue;
    }
    for (const FileInfo& file : scan_files(dir->path()))
      (void)unlink_at(dir->fd(), file.name, file.path, 0);
  }
  return result;
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
