// Checked directory handles: a directory of a cache root or layer opened once, its owner and
// mode checked on the open descriptor, and everything below it reached with openat and
// O_NOFOLLOW from there. A link or another user's directory planted anywhere below a checked
// directory is therefore never followed, even when it appears between a check and a use.
//
// A directory is trusted when it is owned by this user (or, where the rule allows it, by root:
// read-only layers baked into an image) and nobody else can write into it: group- or
// world-writable only with the sticky bit and owned by this user (a shared /tmp-like root).
#pragma once

#include "cache/file_io.h"

#include <llvm/Support/Error.h>

#include <string>

namespace specjit::cache {

enum class OwnerRule {
  self,         // owned by the effective uid (writable roots, their folders, the log)
  self_or_root, // also root-owned (read-only layers)
};

// Why a directory with these attributes must not be trusted, or an empty string.
std::string untrusted_reason(const std::string& path, const struct stat& st, OwnerRule rule);

class DirHandle;
enum class OpenStatus {
  ok,
  missing,
  not_a_directory, // a link, a file, a FIFO... where a directory should be
  untrusted,       // another owner, or writable by others
  io_error,
};
struct OpenedDir;

class DirHandle {
public:
  DirHandle() = default;
  DirHandle(UniqueFd fd, std::string path) : m_fd(std::move(fd)), m_path(std::move(path)) {}
  bool valid() const { return m_fd.valid(); }
  int fd() const { return m_fd.get(); }
  const std::string& path() const { return m_path; }
  std::string path_of(llvm::StringRef name) const { return m_path + "/" + name.str(); }

  // Opens the directory `name` below this one (never through a link) and checks it. With
  // create, makes it first (0700 or `mode`) when missing. Errors are Errc::io naming the path
  // and the reason (not a directory, a link, another owner, writable by others).
  llvm::Expected<DirHandle> child(llvm::StringRef name, bool create, OwnerRule rule,
                                  mode_t mode = 0755) const;
  // The same, saying what was found instead of failing, for callers that repair or skip.
  OpenedDir open_child(llvm::StringRef name, bool create, OwnerRule rule,
                       mode_t mode = 0755) const;

private:
  UniqueFd m_fd;
  std::string m_path;
};

struct OpenedDir {
  OpenStatus status = OpenStatus::missing;
  DirHandle dir;      // valid when ok
  std::string reason; // why not, naming the path
};

// Opens and checks a root or layer. The path itself may go through links the user set up
// (~/.cache on another disk); what it resolves to is checked. With create, a missing root and
// its missing parents are made first (0755). ENOENT without create is an Errc::not_found error.
llvm::Expected<DirHandle> open_checked_root(const std::string& path, bool create, OwnerRule rule);
OpenedDir open_root(const std::string& path, bool create, OwnerRule rule);

} // namespace specjit::cache
