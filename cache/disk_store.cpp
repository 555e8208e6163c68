#include "cache/disk_store.h"

#include "cache/store_layout.h"
#include "support/error.h"
#include "support/logging.h"

#include <llvm/Support/Path.h>

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

} // namespace

LookupResult DiskStore::lookup(const Digest128& key, llvm::StringRef kernel) {
  LookupResult result;
  for (const Layer& layer : readable_layers(m_options, root_readable())) {
    EntryLocation location{layer.paths.entry(key, kernel), layer.index};
    if (!real_directory_chain(layer.paths, kernel))
      continue;
    ReadFile file = read_entry_file(location.path);
    if (file.status == ReadStatus::missing)
      continue;
    if (file.status == ReadStatus::not_regular || file.status == ReadStatus::io_error) {
      log_info("specjit: skipping cache entry '" + location.path +
               (file.err ? "': " + errno_text(file.err) : "': not a regular file"));
      continue;
    }
    llvm::Error error = llvm::Error::success();
    if (file.status == ReadStatus::too_large) {
      error = llvm::make_error<EntryCorruptError>(EntryFault::bad_lengths,
                                                  "file is larger than any valid entry");
    } else {
      llvm::StringRef bytes(file.bytes->getBufferStart(), file.bytes->getBufferSize());
      llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, key);
      if (decoded) {
        if (layer.index == 0 && writable())
          refresh_last_use(file, location.path);
        result.hit = LoadedEntry{std::move(file.bytes), std::move(*decoded), location};
        return result;
      }
      error = decoded.takeError();
    }
    CorruptFinding finding = finding_from(location.path, std::move(error));
    // Another process may have published a good entry over the bad one since we read it.
    finding.moved_aside =
        !location.readonly() && same_file(file, location.path) && quarantine(location);
    result.corrupt.push_back(std::move(finding));
  }
  return result;
}

namespace {

// Writes the temp file completely and durably, then renames it over `final_path`.
llvm::Error write_and_rename(UniqueFd& fd, const std::string& temp, const std::string& final_path,
                             llvm::StringRef bytes) {
  if (int err = write_all(fd.get(), temp, bytes))
    return io_error(IoOp::write, temp, err);
  // Without fsync a crash after the rename could publish a name whose data never reached the
  // disk: exactly the corrupt entry the checksum would then have to catch.
  if (int err = sync_file(fd.get(), temp))
    return io_error(IoOp::fsync, temp, err);
  if (int err = close_file(fd, temp))
    return io_error(IoOp::close, temp, err);
  if (int err = rename_path(temp, final_path))
    return io_error(IoOp::rename, final_path, err);
  return llvm::Error::success();
}

llvm::Error create_temp(const LayerPaths& root, llvm::StringRef stem, std::string& temp,
                        UniqueFd& fd) {
  int err = EEXIST;
  for (int attempt = 0; attempt < 8 && err == EEXIST; ++attempt) {
    temp = root.tmp() + "/" + stem.str() + "." + unique_suffix() + ".tmp";
    err = create_exclusive(temp, 0644, fd);
  }
  return err ? io_error(IoOp::open, temp, err) : llvm::Error::success();
}

// Makes the rename itself durable. Cheap on local file systems; where a directory cannot be
// opened or synced (some network file systems) the entry is still valid, just less durable.
void sync_directory(const std::string& dir) {
  UniqueFd fd;
  if (open_directory(dir, fd) == 0)
    (void)sync_file(fd.get(), dir);
}

} // namespace

llvm::Error write_file_atomically(const LayerPaths& root, llvm::StringRef stem,
                                  const std::string& final_path, llvm::StringRef bytes) {
  std::string temp;
  UniqueFd fd;
  if (llvm::Error error = create_temp(root, stem, temp, fd))
    return error;
  if (llvm::Error error = write_and_rename(fd, temp, final_path, bytes)) {
    fd.reset();
    (void)unlink_path(temp); // a failed publish leaves nothing behind
    return error;
  }
  sync_directory(llvm::sys::path::parent_path(final_path).str());
  return llvm::Error::success();
}

llvm::Error DiskStore::publish(const Digest128& key, llvm::StringRef kernel,
                               llvm::StringRef entry_bytes) {
  if (!writable())
    return make_error(Errc::io, "cache root is not writable: {}", m_unusable_reason);
  // Never publish what a reader would reject: a broken writer must not poison other processes.
  if (llvm::Expected<DecodedEntry> decoded = decode_entry(entry_bytes, key); !decoded)
    return make_error(Errc::invalid_argument, "refusing to publish an invalid entry for {}: {}",
                      key.hex(), llvm::toString(decoded.takeError()));

  LayerPaths root(m_options.root);
  std::string kernel_dir = root.kernel_dir(kernel);
  if (llvm::Error error =
          ensure_directories(m_options.root, {root.base(), root.tmp(), root.entries(), kernel_dir}))
    return error;

  if (llvm::Error error =
          write_file_atomically(root, key.hex(), root.entry(key, kernel), entry_bytes))
    return error;
  if (m_options.max_bytes != 0)
    prune(m_options.max_bytes);
  return llvm::Error::success();
}

CompileLock DiskStore::lock_for_compile(const Digest128& key) {
  if (!writable())
    return {};
  LayerPaths root(m_options.root);
  if (llvm::Error error = ensure_directories(m_options.root, {root.base(), root.locks()})) {
    log_info("specjit: no compile lock: " + llvm::toString(std::move(error)));
    return {};
  }
  std::string path = root.lock(key);
  UniqueFd fd;
  if (int err = open_lock_file(path, fd)) {
    log_info("specjit: no compile lock '" + path + "': " + errno_text(err));
    return {};
  }
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

bool DiskStore::quarantine(const EntryLocation& location) {
  if (location.readonly() || !writable())
    return false;
  LayerPaths root(m_options.root);
  // Only files inside the root's entries/ tree are ever moved.
  if (!llvm::StringRef(location.path).startswith(root.entries() + "/"))
    return false;
  if (llvm::Error error = ensure_directories(m_options.root, {root.base(), root.corrupt()})) {
    log_info("specjit: cannot quarantine: " + llvm::toString(std::move(error)));
    return false;
  }
  llvm::StringRef file = llvm::sys::path::filename(location.path);
  llvm::StringRef kernel_dir =
      llvm::sys::path::filename(llvm::sys::path::parent_path(location.path));
  std::string target =
      root.corrupt() + "/" + kernel_dir.str() + "-" + file.str() + "." + unique_suffix();
  if (int err = rename_path(location.path, target)) {
    log_info("specjit: cannot move '" + location.path + "' aside: " + errno_text(err));
    return false;
  }
  return true;
}

} // namespace specjit::cache
