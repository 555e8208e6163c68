// The one narrow seam between the disk store and the file system. Every open, read, write,
// fsync, rename, unlink, mkdir, stat, time stamp and lock of cache/ goes through here, so that
// tests can inject faults (ENOSPC, EIO, short writes) where they would really happen.
//
// Conventions: every function returns 0 or an errno value (never -1) and leaves the decision
// (miss, skip, error) to its caller. Symbolic links are never followed: files and directories
// are opened with O_NOFOLLOW, inspected with lstat, and time stamps are set on open
// descriptors (H2). Every descriptor is opened with O_CLOEXEC so a compile child process
// never inherits a lock or a half-written temp file.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace specjit::cache {

enum class IoOp {
  open,
  read,
  write,
  fsync,
  close,
  rename,
  unlink,
  mkdir,
  rmdir,
  stat,
  access,
  utime,
  lock,
  list
};
llvm::StringRef io_op_name(IoOp op);

// TEST-ONLY fault injection. The injector is asked before every operation with the path it
// concerns; it returns 0 to let the call run, an errno value to make the call fail with that
// errno without touching the file system, or k_inject_short_write (IoOp::write only) to make
// that write(2) transfer fewer bytes than asked (the seam must then continue correctly).
// Off by default; an empty function turns it off. Process-wide, safe to set from any thread.
inline constexpr int k_inject_short_write = -1;
using FaultInjector = std::function<int(IoOp op, llvm::StringRef path)>;
void set_fault_injector(FaultInjector injector);

// Owns a file descriptor; closes it (ignoring errors) on destruction. Use close_file() where
// the result of close matters (after writing).
class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : m_fd(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd() { reset(); }
  int get() const { return m_fd; }
  bool valid() const { return m_fd >= 0; }
  int release() { return std::exchange(m_fd, -1); }
  void reset();

private:
  int m_fd = -1;
};

// Opens an existing file for reading. O_NONBLOCK so that a FIFO planted as an entry cannot
// hang the reader (callers check S_ISREG with stat_fd before reading).
int open_for_read(const std::string& path, UniqueFd& fd);
// Creates a new file that must not exist yet (O_EXCL), for writing.
int create_exclusive(const std::string& path, mode_t mode, UniqueFd& fd);
// Opens or creates a lock file.
int open_lock_file(const std::string& path, UniqueFd& fd);
// Opens a directory (for fsync).
int open_directory(const std::string& path, UniqueFd& fd);
// Opens a configured root or layer directory, following links in its path (see stat_path).
int open_root_directory(const std::string& path, UniqueFd& fd);

int stat_fd(int fd, const std::string& path, struct stat& st);
int lstat_path(const std::string& path, struct stat& st);
// Follows links: only for the configured root itself, which users legitimately point at a
// symbolic link (~/.cache on another disk). Everything below the root uses lstat_path.
int stat_path(const std::string& path, struct stat& st);
int access_path(const std::string& path, int mode);

// Reads up to `size` bytes into `out`, stopping early only at end of file; `got` says how many.
int read_up_to(int fd, const std::string& path, char* out, size_t size, size_t& got);
// Writes every byte, continuing after short writes and EINTR.
int write_all(int fd, const std::string& path, llvm::StringRef bytes);
int sync_file(int fd, const std::string& path);
// Closes and reports the close error (NFS reports failed writes there).
int close_file(UniqueFd& fd, const std::string& path);

int rename_path(const std::string& from, const std::string& to);
int unlink_path(const std::string& path);
int make_directory(const std::string& path, mode_t mode);
int remove_directory(const std::string& path);
// Sets the modification time of an open file to now (futimens: no path, no link to follow).
int touch_fd(int fd, const std::string& path);
// flock(LOCK_EX | LOCK_NB): 0, EWOULDBLOCK when held elsewhere, or another errno.
int try_lock_exclusive(int fd, const std::string& path);
// The names in a directory (without "." and ".."); the directory itself must not be a link.
int list_directory(const std::string& path, std::vector<std::string>& names);

// The same operations relative to an open directory (openat and friends), so that no
// component of a path below a checked directory can be swapped for a link between the check
// and the use. `name` is one path component; `path` is the full path, for fault injection
// and messages only. Every open adds O_NOFOLLOW and O_CLOEXEC.
int open_at(int dir_fd, llvm::StringRef name, const std::string& path, int flags, mode_t mode,
            UniqueFd& fd);
int stat_at(int dir_fd, llvm::StringRef name, const std::string& path, struct stat& st);
int make_directory_at(int dir_fd, llvm::StringRef name, const std::string& path, mode_t mode);
int rename_at(int from_dir, llvm::StringRef from, int to_dir, llvm::StringRef to,
              const std::string& to_path);
// flags: 0 or AT_REMOVEDIR. Never follows a link: unlinkat removes the link itself.
int unlink_at(int dir_fd, llvm::StringRef name, const std::string& path, int flags);
// The names in an open directory (without "." and ".."); `dir_fd` stays open.
int list_directory_fd(int dir_fd, const std::string& path, std::vector<std::string>& names);

std::string errno_text(int err);
// "cannot <op> '<path>': <errno text>" as a SpecjitError (Errc::io).
llvm::Error io_error(IoOp op, llvm::StringRef path, int err);

} // namespace specjit::cache
