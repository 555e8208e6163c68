#include "cache/stat_hints.h"

#include "cache/dir_handle.h"
#include "cache/file_io.h"
#include "support/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace specjit::cache {

namespace {

constexpr llvm::StringLiteral k_magic = "specjit-hints 1\n";
constexpr size_t k_record_bytes = 7 * sizeof(uint64_t);
constexpr size_t k_head_bytes = 16 + 16 + sizeof(uint64_t);
constexpr size_t k_checksum_bytes = 16;
static_assert(k_magic.size() == 16);

int64_t nanoseconds(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void put(std::string& out, uint64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

uint64_t get(const char*& at) {
  uint64_t value;
  std::memcpy(&value, at, sizeof value);
  at += sizeof value;
  return value;
}

void put(std::string& out, const Digest128& digest) {
  put(out, digest.high);
  put(out, digest.low);
}

Digest128 get_digest(const char*& at) {
  Digest128 digest;
  digest.high = get(at);
  digest.low = get(at);
  return digest;
}

llvm::Error corrupt(llvm::StringRef what) {
  return make_error(Errc::corrupt, "stat hints: {}", what.str());
}

std::string hints_name(const Digest128& definition) { return definition.hex() + ".hints"; }

} // namespace

FileStat FileStat::of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size), nanoseconds(st.st_mtim), nanoseconds(st.st_ctim)};
}

std::optional<Digest128> StatHints::peek(const FileStat& stat) const {
  auto it = m_index.find({stat.device, stat.inode});
  if (it == m_index.end() || !(m_hints[it->second].hint.stat == stat))
    return std::nullopt;
  return m_hints[it->second].hint.digest;
}

std::optional<Digest128> StatHints::lookup(const FileStat& stat) {
  auto it = m_index.find({stat.device, stat.inode});
  if (it == m_index.end())
    return std::nullopt;
  Slot& slot = m_hints[it->second];
  if (!(slot.hint.stat == stat))
    return std::nullopt;
  slot.fresh = true;
  return slot.hint.digest;
}

void StatHints::record(const StatHint& hint) {
  auto [it, inserted] = m_index.try_emplace({hint.stat.device, hint.stat.inode}, m_hints.size());
  if (inserted) {
    m_hints.push_back({hint, true});
    m_changed = true;
    return;
  }
  Slot& slot = m_hints[it->second];
  m_changed |= !(slot.hint.stat == hint.stat) || slot.hint.digest != hint.digest;
  slot = {hint, true};
}

void StatHints::mark_loaded() {
  for (Slot& slot : m_hints)
    slot.fresh = false;
  m_changed = false;
}

std::vector<StatHint> StatHints::to_keep() const {
  std::vector<StatHint> kept;
  kept.reserve(std::min(m_hints.size(), k_max_stat_hints));
  for (bool fresh : {true, false})
    for (const Slot& slot : m_hints)
      if (slot.fresh == fresh && kept.size() < k_max_stat_hints)
        kept.push_back(slot.hint);
  return kept;
}

std::string encode_stat_hints(const Digest128& definition, const StatHints& hints) {
  std::vector<StatHint> kept = hints.to_keep();
  std::string out;
  out.reserve(k_head_bytes + kept.size() * k_record_bytes + k_checksum_bytes);
  out += k_magic;
  put(out, definition);
  put(out, static_cast<uint64_t>(kept.size()));
  for (const StatHint& hint : kept) {
    put(out, hint.stat.device);
    put(out, hint.stat.inode);
    put(out, hint.stat.size);
    put(out, static_cast<uint64_t>(hint.stat.mtime_ns));
    put(out, static_cast<uint64_t>(hint.stat.ctime_ns));
    put(out, hint.digest);
  }
  put(out, hash128(out));
  return out;
}

llvm::Expected<StatHints> decode_stat_hints(llvm::StringRef bytes, const Digest128& definition) {
  if (bytes.size() < k_head_bytes + k_checksum_bytes || !bytes.startswith(k_magic))
    return corrupt("bad magic or size");
  const char* at = bytes.data() + k_magic.size();
  if (get_digest(at) != definition)
    return corrupt("another definition's hints");
  uint64_t count = get(at);
  if (count > k_max_stat_hints ||
      bytes.size() != k_head_bytes + count * k_record_bytes + k_checksum_bytes)
    return corrupt("the record count does not match the size");
  const char* end = bytes.data() + bytes.size() - k_checksum_bytes;
  const char* checksum_at = end;
  if (hash128(llvm::StringRef(bytes.data(), end - bytes.data())) != get_digest(checksum_at))
    return corrupt("checksum mismatch");
  StatHints hints;
  for (uint64_t i = 0; i < count; ++i) {
    StatHint hint;
    hint.stat.device = get(at);
    hint.stat.inode = get(at);
    hint.stat.size = get(at);
    hint.stat.mtime_ns = static_cast<int64_t>(get(at));
    hint.stat.ctime_ns = static_cast<int64_t>(get(at));
    hint.digest = get_digest(at);
    hints.record(hint);
  }
  hints.mark_loaded();
  return hints;
}

StatHints read_stat_hints(const DiskStore& store, const Digest128& definition) {
  if (!store.writable())
    return {};
  llvm::Expected<DirHandle> root = open_checked_root(store.options().root, false, OwnerRule::self);
  llvm::Expected<DirHandle> base =
      root ? root->child("v1", false, OwnerRule::self) : root.takeError();
  llvm::Expected<DirHandle> dir =
      base ? base->child("hints", false, OwnerRule::self) : base.takeError();
  if (!dir) {
    llvm::consumeError(dir.takeError());
    return {};
  }
  std::string name = hints_name(definition);
  std::string path = dir->path_of(name);
  UniqueFd fd;
  struct stat st;
  if (open_at(dir->fd(), name, path, O_RDONLY | O_NONBLOCK, 0, fd) != 0 ||
      stat_fd(fd.get(), path, st) != 0)
    return {};
  // Only this user's own private memo: anything else may describe files it never hashed.
  const size_t largest = k_head_bytes + k_max_stat_hints * k_record_bytes + k_checksum_bytes;
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0 ||
      static_cast<uint64_t>(st.st_size) > largest)
    return {};
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  if (read_up_to(fd.get(), path, bytes.data(), bytes.size(), got) != 0 || got != bytes.size())
    return {};
  llvm::Expected<StatHints> hints = decode_stat_hints(bytes, definition);
  if (!hints) {
    llvm::consumeError(hints.takeError()); // re-hashed, then rewritten
    return {};
  }
  return std::move(*hints);
}

llvm::Error publish_stat_hints(DiskStore& store, const Digest128& definition,
                               const StatHints& hints) {
  if (!store.writable())
    return make_error(Errc::io, "cache root is not writable: {}", store.unusable_reason());
  return store.publish_root_file("hints", hints_name(definition),
                                 encode_stat_hints(definition, hints), Durability::relaxed,
                                 0600);
}

} // namespace specjit::cache
