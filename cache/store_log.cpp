// DiskStore::open_log_for_append: the recompilation log's file in <root>/logs/, opened so that
// nothing another user planted (a link as logs/ or as the file, their own logs/ in a sticky
// root) is ever written through, and nothing at all is created in a refused root.
#include "cache/disk_store.h"

#include "cache/dir_handle.h"
#include "support/error.h"

#include <fcntl.h>
#include <unistd.h>

namespace specjit::cache {

namespace {

llvm::Error check_log_file(int fd, const std::string& path) {
  struct stat st;
  if (int err = stat_fd(fd, path, st))
    return io_error(IoOp::stat, path, err);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::io, "log file '{}' is not a regular file; not writing to it", path);
  if (st.st_uid != ::geteuid())
    return make_error(Errc::io, "log file '{}' is owned by uid {}, not by this user (uid {}); "
                      "not writing to it", path, st.st_uid, ::geteuid());
  // A second name for the file (a hard link made before logs/ was ours) could be anywhere.
  if (st.st_nlink != 1)
    return make_error(Errc::io, "log file '{}' has {} hard links; not writing to it", path,
                      st.st_nlink);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<int> DiskStore::open_log_for_append(llvm::StringRef name) const {
  if (m_root_state == RootState::refused)
    return make_error(Errc::io, "not writing a log into the cache root: {}", m_unusable_reason);
  if (name.empty() || name == "." || name == ".." || name.contains('/'))
    return make_error(Errc::invalid_argument, "'{}' is not a log file name", name.str());
  llvm::Expected<DirHandle> root = open_checked_root(m_options.root, true, OwnerRule::self);
  if (!root)
    return root.takeError();
  llvm::Expected<DirHandle> logs = root->child("logs", true, OwnerRule::self, 0700);
  if (!logs)
    return logs.takeError();
  std::string path = logs->path_of(name);
  UniqueFd fd;
  // O_NONBLOCK: a FIFO planted as the file cannot hang the open; it fails the check below.
  int err = open_at(logs->fd(), name, path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK, 0600, fd);
  if (err == ELOOP)
    return make_error(Errc::io, "log file '{}' is a symbolic link; not followed", path);
  if (err == ENXIO || err == EISDIR) // a FIFO without a reader, a directory
    return make_error(Errc::io, "log file '{}' is not a regular file; not writing to it", path);
  if (err != 0)
    return io_error(IoOp::open, path, err);
  if (llvm::Error error = check_log_file(fd.get(), path))
    return error;
  return fd.release();
}

} // namespace specjit::cache
