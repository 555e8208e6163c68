#include "cache/file_io.h"

#include "support/error.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <sys/file.h>
#include <unistd.h>

namespace specjit::cache {

namespace {

// The injector is consulted on every call, so the common case (off) must cost one relaxed
// load; the mutex only guards replacing it.
std::atomic<bool> g_injecting{false};
std::mutex g_injector_mutex;
std::shared_ptr<FaultInjector> g_injector;

int injected(IoOp op, const std::string& path) {
  if (!g_injecting.load(std::memory_order_acquire))
    return 0;
  std::shared_ptr<FaultInjector> injector;
  {
    std::lock_guard<std::mutex> lock(g_injector_mutex);
    injector = g_injector;
  }
  return injector && *injector ? (*injector)(op, path) : 0;
}

// Runs a system call that returns -1 and sets errno, retrying on EINTR.
template <typename Call> int checked(Call call) {
  for (;;) {
    if (call() != -1)
      return 0;
    if (errno != EINTR)
      return errno;
  }
}

int open_with(const std::string& path, int flags, mode_t mode, UniqueFd& fd) {
  if (int err = injected(IoOp::open, path))
    return err;
  int result = -1;
  int err = checked([&] { return result = ::open(path.c_str(), flags | O_CLOEXEC, mode); });
  if (err == 0)
    fd = UniqueFd(result);
  return err;
}

int read_names(DIR* dir, std::vector<std::string>& names) {
  int err = 0;
  for (;;) {
    errno = 0; // readdir reports errors only through errno
    struct dirent* entry = ::readdir(dir);
    if (!entry) {
      err = errno;
      break;
    }
    llvm::StringRef name(entry->d_name);
    if (name != "." && name != "..")
      names.push_back(name.str());
  }
  ::closedir(dir);
  return err;
}

} // namespace

llvm::StringRef io_op_name(IoOp op) {
  switch (op) {
  case IoOp::open:
    return "open";
  case IoOp::read:
    return "read";
  case IoOp::write:
    return "write";
  case IoOp::fsync:
    return "fsync";
  case IoOp::close:
    return "close";
  case IoOp::rename:
    return "rename";
  case IoOp::unlink:
    return "unlink";
  case IoOp::mkdir:
    return "create directory";
  case IoOp::rmdir:
    return "remove directory";
  case IoOp::stat:
    return "stat";
  case IoOp::access:
    return "access";
  case IoOp::utime:
    return "set the time stamp of";
  case IoOp::lock:
    return "lock";
  case IoOp::list:
    return "list";
  }
  return "access";
}

void set_fault_injector(FaultInjector injector) {
  std::lock_guard<std::mutex> lock(g_injector_mutex);
  bool on = static_cast<bool>(injector);
  g_injector = on ? std::make_shared<FaultInjector>(std::move(injector)) : nullptr;
  g_injecting.store(on, std::memory_order_release);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    m_fd = other.release();
  }
  return *this;
}

void UniqueFd::reset() {
  if (m_fd >= 0)
    ::close(m_fd); // errors deliberately ignored: see close_file for the checked variant
  m_fd = -1;
}

int open_for_read(const std::string& path, UniqueFd& fd) {
  return open_with(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, fd);
}

int create_exclusive(const std::string& path, mode_t mode, UniqueFd& fd) {
  return open_with(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode, fd);
}

int open_lock_file(const std::string& path, UniqueFd& fd) {
  return open_with(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644, fd);
}

int open_directory(const std::string& path, UniqueFd& fd) {
  return open_with(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, fd);
}

int open_root_directory(const std::string& path, UniqueFd& fd) {
  return open_with(path, O_RDONLY | O_DIRECTORY, 0, fd);
}

int stat_fd(int fd, const std::string& path, struct stat& st) {
  if (int err = injected(IoOp::stat, path))
    return err;
  return checked([&] { return ::fstat(fd, &st); });
}

int lstat_path(const std::string& path, struct stat& st) {
  if (int err = injected(IoOp::stat, path))
    return err;
  return checked([&] { return ::lstat(path.c_str(), &st); });
}

int stat_path(const std::string& path, struct stat& st) {
  if (int err = injected(IoOp::stat, path))
    return err;
  return checked([&] { return ::stat(path.c_str(), &st); });
}

int access_path(const std::string& path, int mode) {
  if (int err = injected(IoOp::access, path))
    return err;
  return checked([&] { return ::access(path.c_str(), mode); });
}

int read_up_to(int fd, const std::string& path, char* out, size_t size, size_t& got) {
  got = 0;
  while (got < size) {
    if (int err = injected(IoOp::read, path))
      return err;
    ssize_t n = ::read(fd, out + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  return 0;
}

int write_all(int fd, const std::string& path, llvm::StringRef bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    size_t chunk = bytes.size() - done;
    int fault = injected(IoOp::write, path);
    if (fault == k_inject_short_write)
      chunk = chunk > 1 ? chunk / 2 : chunk;
    else if (fault != 0)
      return fault;
    ssize_t n = ::write(fd, bytes.data() + done, chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    if (n == 0)
      return EIO; // write(2) making no progress would otherwise loop forever
    done += static_cast<size_t>(n);
  }
  return 0;
}

int sync_file(int fd, const std::string& path) {
  if (int err = injected(IoOp::fsync, path))
    return err;
  return checked([&] { return ::fsync(fd); });
}

int close_file(UniqueFd& fd, const std::string& path) {
  int raw = fd.release();
  if (raw < 0)
    return 0;
  if (int err = injected(IoOp::close, path)) {
    ::close(raw);
    return err;
  }
  // Never retry close on EINTR: the descriptor is already gone on Linux.
  return ::close(raw) == 0 || errno == EINTR ? 0 : errno;
}

int rename_path(const std::string& from, const std::string& to) {
  if (int err = injected(IoOp::rename, to))
    return err;
  return checked([&] { return ::rename(from.c_str(), to.c_str()); });
}

int unlink_path(const std::string& path) {
  if (int err = injected(IoOp::unlink, path))
    return err;
  return checked([&] { return ::unlink(path.c_str()); });
}

int make_directory(const std::string& path, mode_t mode) {
  if (int err = injected(IoOp::mkdir, path))
    return err;
  return checked([&] { return ::mkdir(path.c_str(), mode); });
}

int remove_directory(const std::string& path) {
  if (int err = injected(IoOp::rmdir, path))
    return err;
  return checked([&] { return ::rmdir(path.c_str()); });
}

int touch_fd(int fd, const std::string& path) {
  if (int err = injected(IoOp::utime, path))
    return err;
  return checked([&] { return ::futimens(fd, nullptr); });
}

int try_lock_exclusive(int fd, const std::string& path) {
  if (int err = injected(IoOp::lock, path))
    return err;
  return checked([&] { return ::flock(fd, LOCK_EX | LOCK_NB); });
}

int list_directory(const std::string& path, std::vector<std::string>& names) {
  if (int err = injected(IoOp::list, path))
    return err;
  UniqueFd fd;
  if (int err = open_with(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, fd))
    return err;
  DIR* dir = ::fdopendir(fd.get());
  if (!dir)
    return errno;
  fd.release(); // owned by dir now
  return read_names(dir, names);
}

int open_at(int dir_fd, llvm::StringRef name, const std::string& path, int flags, mode_t mode,
            UniqueFd& fd) {
  if (int err = injected(IoOp::open, path))
    return err;
  std::string leaf = name.str();
  int result = -1;
  int err = checked([&] {
    return result = ::openat(dir_fd, leaf.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  });
  if (err == 0)
    fd = UniqueFd(result);
  return err;
}

int stat_at(int dir_fd, llvm::StringRef name, const std::string& path, struct stat& st) {
  if (int err = injected(IoOp::stat, path))
    return err;
  std::string leaf = name.str();
  return checked([&] { return ::fstatat(dir_fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW); });
}

int make_directory_at(int dir_fd, llvm::StringRef name, const std::string& path, mode_t mode) {
  if (int err = injected(IoOp::mkdir, path))
    return err;
  std::string leaf = name.str();
  return checked([&] { return ::mkdirat(dir_fd, leaf.c_str(), mode); });
}

int rename_at(int from_dir, llvm::StringRef from, int to_dir, llvm::StringRef to,
              const std::string& to_path) {
  if (int err = injected(IoOp::rename, to_path))
    return err;
  std::string a = from.str(), b = to.str();
  return checked([&] { return ::renameat(from_dir, a.c_str(), to_dir, b.c_str()); });
}

int unlink_at(int dir_fd, llvm::StringRef name, const std::string& path, int flags) {
  if (int err = injected(flags & AT_REMOVEDIR ? IoOp::rmdir : IoOp::unlink, path))
    return err;
  std::string leaf = name.str();
  return checked([&] { return ::unlinkat(dir_fd, leaf.c_str(), flags); });
}

int list_directory_fd(int dir_fd, const std::string& path, std::vector<std::string>& names) {
  if (int err = injected(IoOp::list, path))
    return err;
  // fdopendir takes the descriptor over: list a duplicate so the caller's stays open.
  int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0)
    return errno;
  DIR* dir = ::fdopendir(copy);
  if (!dir) {
    int err = errno;
    ::close(copy);
    return err;
  }
  ::rewinddir(dir);
  return read_names(dir, names);
}

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the message, which may or may not be in buffer.
  return ::strerror_r(err, buffer, sizeof buffer);
}

llvm::Error io_error(IoOp op, llvm::StringRef path, int err) {
  return make_error(Errc::io, "cannot {} '{}': {}", io_op_name(op).str(), path.str(),
                    errno_text(err));
}

} // namespace specjit::cache
