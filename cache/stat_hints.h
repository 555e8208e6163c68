// Stat hints: a local memo that lets direct mode skip re-hashing a header whose file status is
// exactly what it was when this user last hashed it (ccache's "file stat matches", made safe:
// docs/kernels-from-source.md, "Stat hints"). A hint only says "this file, in this state, had
// these bytes"; it never enters a key, never names a path, and is never read from a read-only
// layer, exported or sent to the remote. A missing, foreign or corrupt hint file costs a
// re-hash, never a wrong key.
//
//   <root>/v1/hints/<definition hex>.hints   mode 0600, temp + rename, not fsynced
//   file       = magic definition count record{count} checksum     native byte order
//   magic      = "specjit-hints 1\n"                               16 bytes
//   definition = high u64, low u64
//   count      = u64                                               at most k_max_stat_hints
//   record     = device u64, inode u64, size u64, mtime_ns i64, ctime_ns i64,
//                digest high u64, digest low u64                   56 bytes
//   checksum   = XXH3-128 of every byte before it (high u64, low u64)
#pragma once

#include "cache/disk_store.h"

#include "support/hash.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/Support/Error.h>

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specjit::cache {

inline constexpr size_t k_max_stat_hints = 4096;

// The part of a file's status that any write to it changes: a write sets mtime and ctime to
// now, and no user can set ctime back (utimensat restoring mtime moves ctime too).
struct FileStat {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;

  static FileStat of(const struct stat& st);
  friend bool operator==(const FileStat&, const FileStat&) = default;
};

struct StatHint {
  FileStat stat;
  Digest128 digest; // hash128 of the file's bytes when it had `stat`
};

class StatHints;
llvm::Expected<StatHints> decode_stat_hints(llvm::StringRef bytes, const Digest128& definition);

class StatHints {
public:
  // The recorded digest when the file's status equals the recorded one, else nullopt. A match
  // marks the hint as used, so that it outlives unused ones when the file is rewritten.
  std::optional<Digest128> lookup(const FileStat& stat);
  // lookup() without marking: safe from several threads while nothing records or looks up.
  std::optional<Digest128> peek(const FileStat& stat) const;
  // Replaces any hint of the same file (device, inode).
  void record(const StatHint& hint);
  // Whether record() changed anything since loading (the file is then worth rewriting).
  bool changed() const { return m_changed; }
  size_t size() const { return m_hints.size(); }
  // Used or recorded hints first, then the others in file order; at most k_max_stat_hints.
  std::vector<StatHint> to_keep() const;

private:
  friend llvm::Expected<StatHints> decode_stat_hints(llvm::StringRef, const Digest128&);
  void mark_loaded(); // what a file held is neither fresh nor a change

  struct Slot {
    StatHint hint;
    bool fresh = false; // used or recorded by this process
  };
  std::vector<Slot> m_hints;
  llvm::DenseMap<std::pair<uint64_t, uint64_t>, size_t> m_index; // (device, inode) -> slot
  bool m_changed = false;
};

std::string encode_stat_hints(const Digest128& definition, const StatHints& hints);
// decode_stat_hints (declared above): Errc::corrupt for a bad size, magic, checksum or another
// definition's hints.

// The root's hints for the definition; empty when the root is not writable, the file is
// missing, not a regular file owned by this user and private to it, or does not decode.
StatHints read_stat_hints(const DiskStore& store, const Digest128& definition);
// Replaces the root's hint file (best effort: not fsynced, a lost file costs a re-hash).
llvm::Error publish_stat_hints(DiskStore& store, const Digest128& definition,
                               const StatHints& hints);

} // namespace specjit::cache
