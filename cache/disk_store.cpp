#include "cache/disk_store.h"

#include "cache/dir_handle.h"
#include "cache/store_layout.h"
#include "support/error.h"
#include "support/logging.h"

#include <llvm/Support/Path.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <unistd.h>

namespace specjit::cache {

namespace {

// Hits refresh the entry's mtime (its last-use stamp) at most this often: a hot entry costs
// one futimens a minute, not one per load, and LRU never needs finer resolution.
constexpr int64_t k_touch_interval_ns = 60ll * 1000000000;
constexpr int k_lock_poll_max_ms = 50;

} // namespace

CompileLock& CompileLock::operator=(CompileLock&& other) noexcept {
  if (this != &other) {
    UniqueFd(m_fd).reset();
    m_fd = std::exchange(other.m_fd, -1);
  }
  return *this;
}

// Closing the descriptor releases the flock; the lock file stays (unlinking it would let two
// processes hold locks on two different files of the same name).
CompileLock::~CompileLock() { UniqueFd(m_fd).reset(); }

DiskStore::DiskStore(StoreOptions options) : m_options(std::move(options)) {
  RootCheck check = check_root(m_options.root);
  m_root_state = check.state;
  m_unusable_reason = std::move(check.reason);
  if (m_root_state == RootState::refused && !m_options.root.empty())
    log_warning(m_unusable_reason);
  check_layers();
  load_trust_key();
}

void DiskStore::check_layers() {
  for (size_t i = 0; i < m_options.readonly_layers.size(); ++i) {
    const std::string& path = m_options.readonly_layers[i];
    // A layer is checked down to entries/: the steps every read goes through.
    KernelDir dirs = open_kernel_dir(path, OwnerRule::self_or_root, "_", /*create=*/false);
    if (dirs.at_kernel || dirs.status == OpenStatus::missing)
      continue; // usable (or nothing there yet, which reads as empty)
    m_refused_layers.push_back({i + 1, path, "read-only layer refused: " + dirs.reason});
    log_warning(m_refused_layers.back().reason);
  }
}

void DiskStore::load_trust_key() {
  if (!trust_key_configured())
    return;
  llvm::Expected<TrustKey> key = cache::load_trust_key(m_options.trust_key_file);
  if (key) {
    m_trust_key = *key;
    return;
  }
  m_trust_key_error = llvm::toString(key.takeError());
  log_warning("SPECJIT_TRUST_KEY_FILE: " + m_trust_key_error +
              "; no imported or read-only layer entry is trusted");
}

std::string DiskStore::entry_path(const Digest128& key, llvm::StringRef kernel) const {
  return LayerPaths(m_options.root).entry(key, kernel);
}

namespace {

void refresh_last_use(ReadFile& file, const std::string& path) {
  if (now_ns() - file.mtime_ns < k_touch_interval_ns)
    return;
  // Best effort: a stamp that cannot be set only makes the entry look older to prune().
  if (int err = touch_fd(file.fd.get(), path))
    log_info("specjit: cannot refresh the last-use time of '" + path + "': " + errno_text(err));
}


CorruptFinding not_a_file(const std::string& path, llvm::StringRef what) {
  return CorruptFinding{path, EntryFault::not_a_file, what.str(), false};
}

} // namespace

std::optional<std::string> tag_problem(const DiskStore& store, const DirHandle& dir,
                                       const Digest128& key, llvm::StringRef bytes) {
  if (!store.trust_key_configured())
    return std::nullopt;
  const TrustKey* trust = store.trust_key();
  if (trust == nullptr)
    return "the trust key cannot be loaded: " + store.trust_key_error();
  ReadFile tag_file = read_entry_at(dir, tag_name(key));
  if (tag_file.status != ReadStatus::ok)
    return std::string("no tag file next to it");
  llvm::StringRef tag_bytes(tag_file.bytes->getBufferStart(), tag_file.bytes->getBufferSize());
  std::optional<Tag> tag = decode_tag_file(tag_bytes);
  if (!tag)
    return std::string("its tag file is malformed");
  if (!verify_tag(*trust, key, bytes, *tag))
    return std::string("its tag does not verify under the configured key");
  return std::nullopt;
}

LookupResult DiskStore::lookup(const Digest128& key, llvm::StringRef kernel) {
  LookupResult result;
  std::string dir_name = kernel_dir_name(kernel);
  for (const Layer& layer : readable_layers(m_options, root_readable(), m_refused_layers)) {
    bool root = layer.index == 0;
    EntryLocation location{layer.paths.entry(key, kernel), layer.index};
    KernelDir dirs = open_kernel_dir(layer.root, layer.owners, dir_name, /*create=*/false);
    if (dirs.status == OpenStatus::missing)
      continue;
    if (dirs.status != OpenStatus::ok) {
      if (!dirs.at_kernel) {
        log_info("specjit: skipping cache layer: " + dirs.reason);
        continue;
      }
      // A link, a file or a foreign directory where the kernel directory should be: every
      // lookup and publish of the kernel would fail on it forever, so the root moves it aside.
      CorruptFinding finding = not_a_file(dirs.entries.path_of(dir_name), dirs.reason);
      finding.moved_aside = root && writable() && move_aside(dirs.entries, dir_name);
      result.corrupt.push_back(std::move(finding));
      continue;
    }
    std::string name = entry_name(key);
    ReadFile file = read_entry_at(dirs.kernel, name);
    if (file.status == ReadStatus::missing)
      continue;
    if (file.status == ReadStatus::io_error) {
      log_info("specjit: skipping cache entry '" + location.path + "': " + errno_text(file.err));
      continue;
    }
    llvm::Error error = llvm::Error::success();
    if (file.status == ReadStatus::not_regular) {
      error = llvm::make_error<EntryCorruptError>(
          EntryFault::not_a_file, "a link, directory or special file where an entry should be");
    } else if (file.status == ReadStatus::too_large) {
      error = llvm::make_error<EntryCorruptError>(EntryFault::bad_lengths,
                                                  "file is larger than any valid entry");
    } else {
      llvm::StringRef bytes(file.bytes->getBufferStart(), file.bytes->getBufferSize());
      llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, key);
      std::optional<std::string> distrust;
      if (decoded && !root)
        distrust = tag_problem(*this, dirs.kernel, key, bytes);
      if (decoded && !distrust) {
        if (root && writable())
          refresh_last_use(file, location.path);
        result.hit = LoadedEntry{std::move(file.bytes), std::move(*decoded), location};
        return result;
      }
      if (decoded)
        error = llvm::make_error<EntryCorruptError>(EntryFault::untrusted, *distrust);
      else
        error = decoded.takeError();
    }
    CorruptFinding finding = finding_from(location.path, std::move(error));
    // Another process may have published a good entry over the bad one since we read it; a
    // link or directory has no identity worth checking (it is never good).
    bool same = file.status == ReadStatus::not_regular || same_file_at(file, dirs.kernel, name);
    finding.moved_aside = root && writable() && same && move_aside(dirs.kernel, name);
    result.corrupt.push_back(std::move(finding));
  }
  return result;
}

std::optional<std::string> DiskStore::layer_entry_problem(const EntryLocation& location,
                                                          const Digest128& key,
                                                          llvm::StringRef bytes) const {
  if (!location.readonly() || !trust_key_configured())
    return std::nullopt;
  if (location.layer > m_options.readonly_layers.size())
    return std::string("not an entry of a configured layer");
  llvm::StringRef dir_name =
      llvm::sys::path::filename(llvm::sys::path::parent_path(location.path));
  KernelDir dirs = open_kernel_dir(m_options.readonly_layers[location.layer - 1],
                                   OwnerRule::self_or_root, dir_name, false);
  if (dirs.status != OpenStatus::ok)
    return dirs.reason;
  return tag_problem(*this, dirs.kernel, key, bytes);
}

std::optional<LoadedEntry> DiskStore::root_entry(const Digest128& key,
                                                 llvm::StringRef kernel) const {
  if (!root_readable())
    return std::nullopt;
  KernelDir dirs = open_kernel_dir(m_options.root, OwnerRule::self, kernel_dir_name(kernel), false);
  if (dirs.status != OpenStatus::ok)
    return std::nullopt;
  ReadFile file = read_entry_at(dirs.kernel, entry_name(key));
  if (file.status != ReadStatus::ok)
    return std::nullopt;
  llvm::StringRef bytes(file.bytes->getBufferStart(), file.bytes->getBufferSize());
  llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, key);
  if (!decoded) {
    llvm::consumeError(decoded.takeError());
    return std::nullopt;
  }
  return LoadedEntry{std::move(file.bytes), std::move(*decoded),
                     EntryLocation{dirs.kernel.path_of(entry_name(key)), 0}};
}

namespace {

// Writes the temp file completely (and durably when asked); the caller renames it into place.
llvm::Error write_temp(UniqueFd& fd, const std::string& temp, llvm::StringRef bytes,
                       Durability durability) {
  if (int err = write_all(fd.get(), temp, bytes))
    return io_error(IoOp::write, temp, err);
  // Without fsync a crash after the rename could publish a name whose data never reached the
  // disk: exactly the corrupt entry the checksum would then have to catch.
  if (durability == Durability::durable)
    if (int err = sync_file(fd.get(), temp))
      return io_error(IoOp::fsync, temp, err);
  if (int err = close_file(fd, temp))
    return io_error(IoOp::close, temp, err);
  return llvm::Error::success();
}

// Publishes `bytes` as `name` in `dir` through a uniquely named temp file in `tmp`. No temp
// file survives a failure.
llvm::Error publish_file(const DirHandle& tmp, const DirHandle& dir, llvm::StringRef name,
                         llvm::StringRef bytes, Durability durability = Durability::durable,
                         mode_t mode = 0644) {
  int err = EEXIST;
  std::string temp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && err == EEXIST; ++attempt) {
    temp = name.str() + "." + unique_suffix() + ".tmp";
    err = open_at(tmp.fd(), temp, tmp.path_of(temp), O_WRONLY | O_CREAT | O_EXCL, mode, fd);
  }
  if (err)
    return io_error(IoOp::open, tmp.path_of(temp), err);
  llvm::Error error = write_temp(fd, tmp.path_of(temp), bytes, durability);
  if (!error)
    if (int rename_err = rename_at(tmp.fd(), temp, dir.fd(), name, dir.path_of(name)))
      error = io_error(IoOp::rename, dir.path_of(name), rename_err);
  if (error) {
    fd.reset();
    (void)unlink_at(tmp.fd(), temp, tmp.path_of(temp), 0);
  }
  return error;
}

// Makes the rename itself durable. Cheap on local file systems; where a directory cannot be
// synced (some network file systems) the entry is still valid, just less durable.
void sync_directory(const DirHandle& dir) { (void)sync_file(dir.fd(), dir.path()); }

} // namespace

llvm::Expected<DirHandle> DiskStore::kernel_dir_for_publish(llvm::StringRef dir_name) {
  KernelDir dirs = open_kernel_dir(m_options.root, OwnerRule::self, dir_name, /*create=*/true);
  if (dirs.status == OpenStatus::ok)
    return std::move(dirs.kernel);
  // A link or a file as the kernel directory: moved aside once, then made properly.
  if (dirs.at_kernel && dirs.status == OpenStatus::not_a_directory &&
      move_aside(dirs.entries, dir_name)) {
    llvm::Expected<DirHandle> kernel = dirs.entries.child(dir_name, true, OwnerRule::self);
    if (kernel)
      return kernel;
    return kernel.takeError();
  }
  return make_error(Errc::io, dirs.reason);
}

llvm::Error DiskStore::publish_root_file(llvm::StringRef subdir, llvm::StringRef name,
                                         llvm::StringRef bytes, Durability durability,
                                         mode_t mode) {
  if (!writable())
    return make_error(Errc::io, "cache root is not writable: {}", m_unusable_reason);
  llvm::Expected<DirHandle> tmp = open_root_subdir(m_options.root, "tmp");
  if (!tmp)
    return tmp.takeError();
  llvm::Expected<DirHandle> dir = open_root_subdir(m_options.root, subdir);
  if (!dir)
    return dir.takeError();
  if (llvm::Error error = publish_file(*tmp, *dir, name, bytes, durability, mode))
    return error;
  if (durability == Durability::durable)
    sync_directory(*dir);
  return llvm::Error::success();
}

llvm::Error DiskStore::publish(const Digest128& key, llvm::StringRef kernel,
                               llvm::StringRef entry_bytes, Durability durability) {
  if (!writable())
    return make_error(Errc::io, "cache root is not writable: {}", m_unusable_reason);
  // Never publish what a reader would reject: a broken writer must not poison other processes.
  if (llvm::Expected<DecodedEntry> decoded = decode_entry(entry_bytes, key); !decoded)
    return make_error(Errc::invalid_argument, "refusing to publish an invalid entry for {}: {}",
                      key.hex(), llvm::toString(decoded.takeError()));

  llvm::Expected<DirHandle> tmp = open_root_subdir(m_options.root, "tmp");
  if (!tmp)
    return tmp.takeError();
  llvm::Expected<DirHandle> dir = kernel_dir_for_publish(kernel_dir_name(kernel));
  if (!dir)
    return dir.takeError();
  std::string name = entry_name(key);
  // A directory, link or FIFO where the entry goes: rename(2) cannot replace a directory, so
  // move whatever it is aside rather than failing on it forever.
  struct stat st;
  if (stat_at(dir->fd(), name, dir->path_of(name), st) == 0 && !S_ISREG(st.st_mode))
    (void)move_aside(*dir, name);
  // The tag goes first: a reader that sees the entry also sees its tag.
  if (m_trust_key)
    if (llvm::Error error =
            publish_file(*tmp, *dir, tag_name(key),
                         encode_tag_file(compute_tag(*m_trust_key, key, entry_bytes)), durability))
      return error;
  if (llvm::Error error = publish_file(*tmp, *dir, name, entry_bytes, durability))
    return error;
  if (durability == Durability::durable)
    sync_directory(*dir);
  if (m_options.max_bytes != 0)
    prune(m_options.max_bytes);
  return llvm::Error::success();
}

CompileLock DiskStore::lock_for_compile(const Digest128& key) {
  if (!writable())
    return {};
  llvm::Expected<DirHandle> locks = open_root_subdir(m_options.root, "locks");
  if (!locks) {
    log_info("specjit: no compile lock: " + llvm::toString(locks.takeError()));
    return {};
  }
  std::string name = key.hex() + ".lock";
  std::string path = locks->path_of(name);
  UniqueFd fd;
  if (int err = open_at(locks->fd(), name, path, O_RDWR | O_CREAT | O_NONBLOCK, 0644, fd)) {
    log_info("specjit: no compile lock '" + path + "': " + errno_text(err));
    return {};
  }
  struct stat st;
  if (stat_fd(fd.get(), path, st) != 0 || !S_ISREG(st.st_mode))
    return {};
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(std::max<int64_t>(m_options.lock_timeout_ms, 0));
  int sleep_ms = 1;
  for (;;) {
    int err = try_lock_exclusive(fd.get(), path);
    if (err == 0)
      return CompileLock(fd.release());
    if (err != EWOULDBLOCK)
      return {}; // e.g. a file system without flock: compile without the lock
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return {};
    // Short sleeps first (the holder is often about to publish), backing off to a cap.
    auto nap = std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(sleep_ms),
                                                             deadline - now);
    std::this_thread::sleep_for(nap);
    sleep_ms = std::min(sleep_ms * 2, k_lock_poll_max_ms);
  }
}

bool DiskStore::move_aside(const DirHandle& dir, llvm::StringRef name) {
  llvm::Expected<DirHandle> corrupt = open_root_subdir(m_options.root, "corrupt");
  if (!corrupt) {
    log_info("specjit: cannot quarantine: " + llvm::toString(corrupt.takeError()));
    return false;
  }
  std::string label = llvm::sys::path::filename(dir.path()).str();
  std::string target = label + "-" + name.str() + "." + unique_suffix();
  if (int err = rename_at(dir.fd(), name, corrupt->fd(), target, corrupt->path_of(target))) {
    log_info("specjit: cannot move '" + dir.path_of(name) + "' aside: " + errno_text(err));
    return false;
  }
  // A tag without its entry is useless; one left behind would only confuse a later reader.
  if (llvm::StringRef(name).endswith(k_entry_suffix)) {
    std::string tag = llvm::StringRef(name).drop_back(k_entry_suffix.size()).str() +
                      k_tag_suffix.str();
    (void)unlink_at(dir.fd(), tag, dir.path_of(tag), 0);
  }
  return true;
}

bool DiskStore::quarantine(const EntryLocation& location) {
  if (location.readonly() || !writable())
    return false;
  LayerPaths root(m_options.root);
  // Only things inside the root's entries/<kernel>/ are ever moved.
  llvm::StringRef rest(location.path);
  if (!rest.consume_front(root.entries() + "/"))
    return false;
  auto [dir_name, name] = rest.split('/');
  if (dir_name.empty() || name.empty() || name.contains('/'))
    return false;
  KernelDir dirs = open_kernel_dir(m_options.root, OwnerRule::self, dir_name, false);
  if (dirs.status != OpenStatus::ok)
    return false;
  return move_aside(dirs.kernel, name);
}

} // namespace specjit::cache
