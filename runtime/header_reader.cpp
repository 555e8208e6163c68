#include "runtime/header_reader.h"

#include <linux/magic.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

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

bool plain_relative_name(llvm::StringRef name) {
  if (name.empty() || name.front() == '/' || name.back() == '/')
    return false;
  while (!name.empty()) {
    auto [component, rest] = name.split('/');
    if (component.empty() || component == "." || component == "..")
      return false;
    name = rest;
  }
  return true;
}

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

HeaderReader::HeaderReader(llvm::ArrayRef<std::string> include_dirs,
                           HeaderReaderOptions options)
    : m_subtrees(include_dirs.size()), m_options(options),
      m_settled_before_ns(realtime_ns() - options.settle.count()) {
  // Opened as the user spelled them, links included, exactly as NVRTC searches them.
  for (const std::string& dir : include_dirs)
    m_dirs.emplace_back(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

std::optional<HeaderReader::Resolved> HeaderReader::resolve(const std::string& name) {
  auto [it, inserted] = m_resolved.try_emplace(name);
  if (inserted)
    it->second = plain_relative_name(name) ? locate(name) : std::nullopt;
  return it->second;
}

std::optional<HeaderReader::Resolved> HeaderReader::locate(const std::string& name) {
  for (uint32_t i = 0; i < m_dirs.size(); ++i) {
    if (!may_hold(i, name))
      continue;
    struct stat st;
    ++m_counts.probes;
    if (::fstatat(m_dirs[i].get(), name.c_str(), &st, 0) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (m_options.hints && m_options.use == HintUse::lookup)
      if (std::optional<Digest128> digest = m_options.hints->lookup(cache::FileStat::of(st))) {
        ++m_counts.from_hints;
        return Resolved{i, digest};
      }
    // O_NONBLOCK: a FIFO swapped in since the stat cannot hang the check.
    cache::UniqueFd fd(::openat(m_dirs[i].get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    return Resolved{i, hash_open(std::move(fd))};
  }
  return std::nullopt;
}

// False only when the directory certainly holds no "first/..." (no such subdirectory); any
// other answer (an error, a link to check) means probing the full name.
bool HeaderReader::may_hold(uint32_t dir, const std::string& name) {
  if (!m_dirs[dir].valid())
    return false;
  size_t slash = name.find('/');
  if (slash == std::string::npos)
    return true;
  auto [it, inserted] = m_subtrees[dir].try_emplace(llvm::StringRef(name).take_front(slash), true);
  if (inserted) {
    struct stat st;
    ++m_counts.probes;
    std::string first = name.substr(0, slash);
    if (::fstatat(m_dirs[dir].get(), first.c_str(), &st, 0) == 0)
      it->second = S_ISDIR(st.st_mode);
    else
      it->second = errno != ENOENT && errno != ENOTDIR;
  }
  return it->second;
}

std::optional<Digest128> HeaderReader::hash_path(const std::string& path) {
  return hash_open(cache::UniqueFd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)));
}

std::optional<Digest128> HeaderReader::hash_open(cache::UniqueFd fd) {
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return std::nullopt;
  // The status is taken before the bytes: a write after it moves ctime on, so a hint recorded
  // from it can only fail to match later, never match bytes it did not describe.
  const size_t size = static_cast<size_t>(st.st_size);
  if (m_buffer.size() < size)
    m_buffer.resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd.get(), m_buffer.data() + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  Digest128 digest = hash128(llvm::StringRef(m_buffer.data(), got));
  ++m_counts.hashed;
  if (m_options.hints && got == size && hint_safe(fd.get(), st))
    m_options.hints->record({cache::FileStat::of(st), digest});
  return digest;
}

bool HeaderReader::hint_safe(int fd, const struct stat& st) {
  if (cache::FileStat::of(st).ctime_ns >= m_settled_before_ns)
    return false;
  auto [it, inserted] = m_hint_file_systems.try_emplace(static_cast<uint64_t>(st.st_dev), false);
  if (inserted) {
    struct statfs fs;
    it->second = ::fstatfs(fd, &fs) == 0 && keeps_change_time(static_cast<int64_t>(fs.f_type));
  }
  return it->second;
}

} // namespace specjit::runtime
