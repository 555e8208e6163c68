#include "cache/dir_handle.h"

#include "support/error.h"

#include <llvm/Support/Path.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace specjit::cache {

std::string untrusted_reason(const std::string& path, const struct stat& st, OwnerRule rule) {
  uid_t self = ::geteuid();
  bool owner_ok = st.st_uid == self || (rule == OwnerRule::self_or_root && st.st_uid == 0);
  if (!owner_ok)
    return fmt::format("cache directory '{}' is owned by uid {}, not by this user (uid {}); "
                       "refusing to use it",
                       path, st.st_uid, self);
  bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (others_write && !((st.st_mode & S_ISVTX) && st.st_uid == self))
    return fmt::format("cache directory '{}' is {}-writable{}; refusing to use it", path,
                       (st.st_mode & S_IWOTH) ? "world" : "group",
                       (st.st_mode & S_ISVTX) ? " and not owned by this user"
                                              : " without the sticky bit");
  return "";
}

namespace {

OpenedDir checked(UniqueFd fd, std::string path, OwnerRule rule) {
  struct stat st;
  if (int err = stat_fd(fd.get(), path, st))
    return {OpenStatus::io_error, {}, fmt::format("cannot stat '{}': {}", path, errno_text(err))};
  if (!S_ISDIR(st.st_mode))
    return {OpenStatus::not_a_directory, {}, fmt::format("'{}' is not a directory", path)};
  if (std::string reason = untrusted_reason(path, st, rule); !reason.empty())
    return {OpenStatus::untrusted, {}, std::move(reason)};
  return {OpenStatus::ok, DirHandle(std::move(fd), std::move(path)), ""};
}

llvm::Expected<DirHandle> as_expected(OpenedDir opened) {
  switch (opened.status) {
  case OpenStatus::ok:
    return std::move(opened.dir);
  case OpenStatus::missing:
    return make_error(Errc::not_found, opened.reason);
  default:
    return make_error(Errc::io, opened.reason);
  }
}

// Like mkdir -p for the root's own path: links in it are the user's configuration.
int make_parents(const std::string& path) {
  struct stat st;
  if (stat_path(path, st) == 0)
    return 0;
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty() && parent != path)
    if (int err = make_parents(parent.str()))
      return err;
  int err = make_directory(path, 0755);
  return err == EEXIST ? 0 : err;
}

} // namespace

OpenedDir DirHandle::open_child(llvm::StringRef name, bool create, OwnerRule rule,
                                mode_t mode) const {
  std::string path = path_of(name);
  if (create) {
    int err = make_directory_at(fd(), name, path, mode);
    if (err != 0 && err != EEXIST)
      return {OpenStatus::io_error, {}, fmt::format("cannot create directory '{}': {}", path,
                                                    errno_text(err))};
  }
  UniqueFd child_fd;
  int err = open_at(fd(), name, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, child_fd);
  if (err == ENOENT)
    return {OpenStatus::missing, {}, fmt::format("'{}' does not exist", path)};
  if (err == ELOOP || err == ENOTDIR)
    return {OpenStatus::not_a_directory, {},
            fmt::format("'{}' is not a directory (symbolic links are not followed)", path)};
  if (err != 0)
    return {OpenStatus::io_error, {}, fmt::format("cannot open '{}': {}", path, errno_text(err))};
  return checked(std::move(child_fd), std::move(path), rule);
}

llvm::Expected<DirHandle> DirHandle::child(llvm::StringRef name, bool create, OwnerRule rule,
                                           mode_t mode) const {
  return as_expected(open_child(name, create, rule, mode));
}

OpenedDir open_root(const std::string& path, bool create, OwnerRule rule) {
  if (path.empty())
    return {OpenStatus::missing, {}, "no cache root is configured"};
  if (create)
    if (int err = make_parents(path))
      return {OpenStatus::io_error, {},
              fmt::format("cannot create directory '{}': {}", path, errno_text(err))};
  UniqueFd fd;
  // The one open that follows links: the root path is the user's own configuration.
  int err = open_root_directory(path, fd);
  if (err == ENOENT)
    return {OpenStatus::missing, {}, fmt::format("cache directory '{}' does not exist", path)};
  if (err == ENOTDIR)
    return {OpenStatus::not_a_directory, {}, fmt::format("'{}' is not a directory", path)};
  if (err != 0)
    return {OpenStatus::io_error, {}, fmt::format("cannot open '{}': {}", path, errno_text(err))};
  return checked(std::move(fd), path, rule);
}

llvm::Expected<DirHandle> open_checked_root(const std::string& path, bool create,
                                            OwnerRule rule) {
  return as_expected(open_root(path, create, rule));
}

} // namespace specjit::cache
