#include "cache/store_layout.h"

#include "cache/dir_handle.h"

#include "support/error.h"
#include "support/hash.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

namespace specjit::cache {

LayerPaths::LayerPaths(llvm::StringRef layer_root) : m_base(layer_root.str() + "/v1") {}

std::string LayerPaths::kernel_dir(llvm::StringRef kernel) const {
  return entries() + "/" + kernel_dir_name(kernel);
}

std::string LayerPaths::entry(const Digest128& key, llvm::StringRef kernel) const {
  return kernel_dir(kernel) + "/" + key.hex() + k_entry_suffix.str();
}

std::string LayerPaths::lock(const Digest128& key) const {
  return locks() + "/" + key.hex() + ".lock";
}

std::vector<Layer> readable_layers(const StoreOptions& options, bool root_readable,
                                   const std::vector<RefusedLayer>& refused) {
  std::vector<Layer> layers;
  if (root_readable)
    layers.push_back({0, LayerPaths(options.root), options.root, OwnerRule::self});
  for (size_t i = 0; i < options.readonly_layers.size(); ++i) {
    bool is_refused = std::any_of(refused.begin(), refused.end(),
                                  [&](const RefusedLayer& r) { return r.layer == i + 1; });
    if (!is_refused)
      layers.push_back({i + 1, LayerPaths(options.readonly_layers[i]), options.readonly_layers[i],
                        OwnerRule::self_or_root});
  }
  return layers;
}

CorruptFinding finding_from(const std::string& path, llvm::Error error) {
  CorruptFinding finding{path, EntryFault::bad_metadata, "", false};
  llvm::handleAllErrors(
      std::move(error),
      [&](const EntryCorruptError& e) {
        finding.fault = e.fault();
        finding.detail = e.detail();
      },
      [&](const llvm::ErrorInfoBase& e) { finding.detail = e.message(); });
  return finding;
}

std::string kernel_dir_name(llvm::StringRef kernel) {
  if (kernel.empty())
    return "_";
  std::string name = kernel.str();
  for (char& c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok)
      c = '_';
  }
  if (name[0] == '.')
    name[0] = '_';
  return name;
}

namespace {

// The deepest existing ancestor of a missing path: whether the path can be created there.
std::string nearest_existing(std::string path) {
  struct stat st;
  while (!path.empty() && stat_path(path, st) != 0) {
    llvm::StringRef parent = llvm::sys::path::parent_path(path);
    if (parent == path)
      break;
    path = parent.str();
  }
  return path.empty() ? std::string(".") : path;
}

RootCheck read_only(std::string reason) { return {RootState::read_only, std::move(reason)}; }

// Whether a directory can be created in `dir`, by creating (and removing) a uniquely named one.
// access(2) is not enough where a directory is to be created: it grants root write access to
// pseudo file systems such as /proc, where mkdir then fails (ENOENT, EPERM...). The probe name
// is unique, so it never removes a directory another process is creating.
int probe_create(const std::string& dir) {
  std::string probe = dir + "/.specjit-probe." + unique_suffix();
  if (int err = make_directory(probe, 0700))
    return err;
  (void)remove_directory(probe);
  return 0;
}

} // namespace

RootCheck check_root(const std::string& root) {
  if (root.empty())
    return {RootState::refused, "no cache root is configured"};
  struct stat st;
  int err = stat_path(root, st);
  if (err == ENOENT) {
    std::string parent = nearest_existing(root);
    int create_err = access_path(parent, W_OK | X_OK);
    if (create_err == 0)
      create_err = probe_create(parent);
    if (create_err)
      return read_only(fmt::format("cannot create cache root '{}': '{}': {}", root, parent,
                                   errno_text(create_err)));
    return {};
  }
  if (err != 0)
    return read_only(fmt::format("cannot use cache root '{}': {}", root, errno_text(err)));
  if (!S_ISDIR(st.st_mode))
    return {RootState::refused, fmt::format("cache root '{}' is not a directory", root)};
  if (std::string reason = untrusted_reason(root, st, OwnerRule::self); !reason.empty())
    return {RootState::refused, reason};

  LayerPaths layer(root);
  err = lstat_path(layer.base(), st);
  if (err == 0 && !S_ISDIR(st.st_mode))
    return {RootState::refused,
            fmt::format("'{}' is not a directory (symbolic links are not followed)", layer.base())};
  if (err == 0)
    if (std::string reason = untrusted_reason(layer.base(), st, OwnerRule::self); !reason.empty())
      return {RootState::refused, reason};
  std::string writable_dir = err == 0 ? layer.base() : root;
  int access_err = access_path(writable_dir, W_OK | X_OK);
  // Without v1/ yet, the first publish must create it: check that it can.
  if (access_err == 0 && err != 0)
    access_err = probe_create(root);
  if (access_err)
    return read_only(fmt::format("cache directory '{}' is not writable: {}", writable_dir,
                                 errno_text(access_err)));
  return {};
}

namespace {

llvm::Error ensure_one(const std::string& dir, bool follow) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st;
    int err = follow ? stat_path(dir, st) : lstat_path(dir, st);
    if (err == 0) {
      if (S_ISDIR(st.st_mode))
        return llvm::Error::success();
      return make_error(Errc::io, "'{}' is not a directory (symbolic links are not followed)", dir);
    }
    if (err != ENOENT)
      return io_error(IoOp::stat, dir, err);
    err = make_directory(dir, 0755);
    // EEXIST: another process created it in between; check what it created.
    if (err == 0)
      return llvm::Error::success();
    if (err != EEXIST)
      return io_error(IoOp::mkdir, dir, err);
  }
  return make_error(Errc::io, "cannot create directory '{}'", dir);
}

llvm::Error ensure_root(const std::string& root) {
  // Parents first (like mkdir -p); they belong to the user's configuration, links allowed.
  llvm::StringRef parent = llvm::sys::path::parent_path(root);
  if (!parent.empty() && parent != root) {
    struct stat st;
    if (stat_path(parent.str(), st) == ENOENT)
      if (llvm::Error error = ensure_root(parent.str()))
        return error;
  }
  return ensure_one(root, /*follow=*/true);
}

} // namespace

llvm::Error ensure_directories(const std::string& root, llvm::ArrayRef<std::string> dirs) {
  if (llvm::Error error = ensure_root(root))
    return error;
  for (const std::string& dir : dirs)
    if (llvm::Error error = ensure_one(dir, /*follow=*/false))
      return error;
  return llvm::Error::success();
}

namespace {

bool is_real_directory(const std::string& path) {
  struct stat st;
  return lstat_path(path, st) == 0 && S_ISDIR(st.st_mode);
}

int64_t mtime_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void scan_dir(const std::string& dir, bool entries_only, std::vector<FileInfo>& out) {
  std::vector<std::string> names;
  if (list_directory(dir, names) != 0)
    return;
  std::string dir_name = llvm::sys::path::filename(dir).str();
  for (std::string& name : names) {
    if (entries_only && !llvm::StringRef(name).endswith(k_entry_suffix))
      continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat_path(path, st) != 0 || S_ISDIR(st.st_mode))
      continue;
    if (entries_only && !S_ISREG(st.st_mode))
      continue;
    out.push_back(
        {path, std::move(name), dir_name, static_cast<uint64_t>(st.st_size), mtime_of(st)});
  }
}

} // namespace

bool real_directory_chain(const LayerPaths& layer, llvm::StringRef kernel) {
  return is_real_directory(layer.base()) && is_real_directory(layer.entries()) &&
         is_real_directory(layer.kernel_dir(kernel));
}

bool real_deps_directory(const LayerPaths& layer) {
  return is_real_directory(layer.base()) && is_real_directory(layer.deps());
}

std::vector<FileInfo> scan_entries(const LayerPaths& layer, std::optional<llvm::StringRef> kernel) {
  std::vector<FileInfo> files;
  if (!is_real_directory(layer.base()) || !is_real_directory(layer.entries()))
    return files;
  std::vector<std::string> kernel_dirs;
  if (kernel) {
    kernel_dirs.push_back(kernel_dir_name(*kernel));
  } else if (list_directory(layer.entries(), kernel_dirs) != 0) {
    return files;
  }
  for (const std::string& name : kernel_dirs) {
    std::string dir = layer.entries() + "/" + name;
    if (is_real_directory(dir))
      scan_dir(dir, /*entries_only=*/true, files);
  }
  return files;
}

std::vector<FileInfo> scan_files(const std::string& dir) {
  std::vector<FileInfo> files;
  if (is_real_directory(dir))
    scan_dir(dir, /*entries_only=*/false, files);
  return files;
}

namespace {

void read_opened(ReadFile& file, const std::string& path);

ReadFile after_open(ReadFile file, int err, const std::string& path) {
  if (err == ENOENT || err == ENOTDIR) {
    file.status = ReadStatus::missing;
    return file;
  }
  if (err != 0) {
    // ELOOP: a link planted as the entry. Never followed; a miss.
    file.status = err == ELOOP ? ReadStatus::not_regular : ReadStatus::io_error;
    file.err = err;
    return file;
  }
  read_opened(file, path);
  return file;
}

void read_opened(ReadFile& file, const std::string& path) {
  int err = 0;
  struct stat st;
  if ((err = stat_fd(file.fd.get(), path, st)) != 0) {
    file.status = ReadStatus::io_error;
    file.err = err;
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    file.status = ReadStatus::not_regular;
    return;
  }
  file.mtime_ns = mtime_of(st);
  file.device = st.st_dev;
  file.inode = st.st_ino;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > k_max_entry_bytes) {
    file.status = ReadStatus::too_large;
    return;
  }
  // Entries are immutable once renamed into place, so the size seen now is the size to read;
  // a shorter read leaves a short buffer, which decode_entry reports as truncated.
  auto buffer = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(size, path);
  if (!buffer) {
    file.status = ReadStatus::io_error;
    file.err = ENOMEM;
    return;
  }
  size_t got = 0;
  if ((err = read_up_to(file.fd.get(), path, buffer->getBufferStart(), size, got)) != 0) {
    file.status = ReadStatus::io_error;
    file.err = err;
    return;
  }
  if (got < size) {
    // The file shrank under us (it should not): keep what was read; decoding reports it.
    auto shorter = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(got, path);
    if (!shorter) {
      file.status = ReadStatus::io_error;
      file.err = ENOMEM;
      return;
    }
    std::memcpy(shorter->getBufferStart(), buffer->getBufferStart(), got);
    buffer = std::move(shorter);
  }
  file.bytes = std::move(buffer);
  file.status = ReadStatus::ok;
}

} // namespace

ReadFile read_entry_file(const std::string& path) {
  ReadFile file;
  int err = open_for_read(path, file.fd);
  return after_open(std::move(file), err, path);
}

ReadFile read_entry_at(const DirHandle& dir, llvm::StringRef name) {
  ReadFile file;
  std::string path = dir.path_of(name);
  int err = open_at(dir.fd(), name, path, O_RDONLY | O_NONBLOCK, 0, file.fd);
  return after_open(std::move(file), err, path);
}

bool same_file(const ReadFile& file, const std::string& path) {
  struct stat st;
  return lstat_path(path, st) == 0 && st.st_dev == file.device && st.st_ino == file.inode;
}

bool same_file_at(const ReadFile& file, const DirHandle& dir, llvm::StringRef name) {
  struct stat st;
  return stat_at(dir.fd(), name, dir.path_of(name), st) == 0 && st.st_dev == file.device &&
         st.st_ino == file.inode;
}

namespace {

bool step(OpenedDir opened, DirHandle& out, KernelDir& result) {
  if (opened.status != OpenStatus::ok) {
    result.status = opened.status;
    result.reason = std::move(opened.reason);
    return false;
  }
  out = std::move(opened.dir);
  return true;
}

} // namespace

KernelDir open_kernel_dir(const std::string& layer_root, OwnerRule rule, llvm::StringRef dir_name,
                          bool create) {
  KernelDir result;
  DirHandle root, base;
  if (!step(open_root(layer_root, create, rule), root, result) ||
      !step(root.open_child("v1", create, rule), base, result) ||
      !step(base.open_child("entries", create, rule), result.entries, result))
    return result;
  result.at_kernel = true;
  if (!step(result.entries.open_child(dir_name, create, rule), result.kernel, result))
    return result;
  result.status = OpenStatus::ok;
  return result;
}

llvm::Expected<DirHandle> open_root_subdir(const std::string& root, llvm::StringRef name) {
  llvm::Expected<DirHandle> top = open_checked_root(root, true, OwnerRule::self);
  if (!top)
    return top.takeError();
  llvm::Expected<DirHandle> base = top->child("v1", true, OwnerRule::self);
  if (!base)
    return base.takeError();
  return base->child(name, true, OwnerRule::self);
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  // pid + counter are unique on one host; the hashed clock and thread id make a clash between
  // hosts sharing a directory (NFS) vanishingly unlikely, and O_EXCL catches the rest.
  uint64_t seed[4] = {static_cast<uint64_t>(now_ns()), n,
                      std::hash<std::thread::id>{}(std::this_thread::get_id()),
                      static_cast<uint64_t>(::getpid())};
  uint64_t noise = hash64(seed, sizeof seed);
  return fmt::format("{}.{}.{:08x}", ::getpid(), n, noise & 0xffffffffu);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace specjit::cache
