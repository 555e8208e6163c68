#include "runtime/header_hash.h"

#include <linux/magic.h>

#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace specjit::runtime {

namespace {

// File systems whose ctime is the kernel's own change time, set on every write and never by a
// user. Left out: network file systems (a cached stat can lag another client's write that an
// open would see), FUSE (whatever the daemon reports), FAT (no change time).
bool keeps_change_time(int64_t type) {
  constexpr int64_t k_zfs_magic = 0x2fc12fc1;
  switch (type) {
  case EXT4_SUPER_MAGIC: // also ext2 and ext3
  case XFS_SUPER_MAGIC:
  case BTRFS_SUPER_MAGIC:
  case F2FS_SUPER_MAGIC:
  case TMPFS_MAGIC:
  case OVERLAYFS_SUPER_MAGIC:
  case SQUASHFS_MAGIC:
  case EROFS_SUPER_MAGIC_V1:
  case k_zfs_magic:
    return true;
  default:
    return false;
  }
}

} // namespace

HashedFile FileHasher::hash(int fd) {
  HashedFile result;
  if (fd < 0 || ::fstat(fd, &result.status) != 0 || !S_ISREG(result.status.st_mode))
    return result;
  // The status is taken before the bytes: a write after it moves ctime on, so a hint recorded
  // from it can only fail to match later, never match bytes it did not describe.
  result.digest = hash_contents(fd, static_cast<size_t>(result.status.st_size));
  auto [it, inserted] =
      m_file_systems.try_emplace(static_cast<uint64_t>(result.status.st_dev), false);
  if (inserted) {
    struct statfs fs;
    it->second = ::fstatfs(fd, &fs) == 0 && keeps_change_time(static_cast<int64_t>(fs.f_type));
  }
  result.keeps_change_time = it->second;
  return result;
}

// Up to `want` bytes into the buffer, fewer only at the end of the file.
std::optional<size_t> FileHasher::fill(int fd, size_t want) {
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::read(fd, m_buffer.data() + got, want - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  return got;
}

// The first `size` bytes (fewer if the file is shorter now) through one small buffer: a fresh
// process would otherwise fault in a buffer as large as the largest header.
std::optional<Digest128> FileHasher::hash_contents(int fd, size_t size) {
  if (m_buffer.empty())
    m_buffer.resize(k_read_chunk);
  size_t want = std::min(size, k_read_chunk);
  std::optional<size_t> got = fill(fd, want);
  if (!got)
    return std::nullopt;
  if (*got < want || *got == size) // the whole file in one piece: most headers
    return hash128(llvm::StringRef(m_buffer.data(), *got));
  ByteHasher hasher;
  for (size_t left = size; *got > 0;) {
    hasher.update(llvm::StringRef(m_buffer.data(), *got));
    left -= *got;
    if (*got < want || left == 0)
      break;
    want = std::min(left, k_read_chunk);
    if (!(got = fill(fd, want)))
      return std::nullopt;
  }
  return hasher.finish();
}

} // namespace specjit::runtime
