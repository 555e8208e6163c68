// The layered on-disk cache: one writable root, then read-only base layers searched in order.
//
//   <root>/v1/entries/<kernel>/<key hex>.sjc   published entries (entry_format.h); <kernel> is
//                                              the id with anything but [A-Za-z0-9_.-] (and a
//                                              leading dot) replaced by '_'
//   <root>/v1/entries/<kernel>/<key hex>.sjt   the entry's tag (entry_auth.h), written when a
//                                              trust key is configured
//   <root>/logs/                               the recompilation log (open_log_for_append)
//   <root>/v1/tmp/                             temp files of writers in flight
//   <root>/v1/corrupt/                         entries that failed verification, moved aside
//   <root>/v1/locks/<key hex>.lock             per-key compile locks (advisory, optional)
//   <root>/v1/deps/<definition hex>.json       header dependency manifests (deps_manifest.h)
//   <root>/v1/hints/<definition hex>.hints     this user's stat hints for them (stat_hints.h)
//
// Every directory below a root or layer is opened from the one above with O_NOFOLLOW and its
// owner and mode checked on the descriptor (dir_handle.h); files are opened relative to it.
// Read-only layers get the same checks (root-owned is fine for them): a layer another user
// owns or can write is refused once, with the reason (refused_layers()), and never read. With
// a trust key, an entry of a read-only layer is used only with a valid tag (.sjt sidecar).
// Promises (../shared/RELIABILITY.md): a lookup returns only verified bytes; a fault is a miss,
// never an error to the caller; publish is write-temp + fsync + rename in the root's file
// system; read-only layers are never written (no locks, no stamps, no quarantine); symbolic
// links are never followed below a layer's root (the root path itself may be a link the user
// set up, e.g. ~/.cache on another disk). A root that cannot be written (permissions,
// read-only file system) is still read but never written; a root that is unsafe (owned by
// another user, or world-writable without the sticky bit, itself or its v1/) is neither read
// nor written (H1). Either way the engine keeps compiled variants in memory only.
// All file-system calls go through cache/file_io.h, where tests inject faults.
// Last use is the entry's mtime, refreshed by hits at most once a minute: eviction never
// depends on atime. Thread-safe; many processes may share one root.
#pragma once

#include "cache/entry_auth.h"
#include "cache/entry_format.h"

#include <llvm/Support/MemoryBuffer.h>

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specjit::cache {

class DirHandle;
struct Layer;

struct StoreOptions {
  std::string root;                         // the writable root (created on first publish)
  std::vector<std::string> readonly_layers; // searched after the root, never written
  uint64_t max_bytes = 0;                   // size limit of the root; 0: none
  int64_t stale_temp_seconds = 3600;        // temp files older than this belong to dead writers
  int64_t lock_timeout_ms = 10000;          // how long lock_for_compile waits
  std::string trust_key_file;               // empty: no key (entry_auth.h)
};

struct RefusedLayer {
  size_t layer = 0; // 1..n: readonly_layers[layer - 1]
  std::string path;
  std::string reason;
};

struct EntryLocation {
  std::string path;
  size_t layer = 0; // 0: the writable root; 1..n: readonly_layers[layer - 1]
  bool readonly() const { return layer != 0; }
};

struct LoadedEntry {
  std::unique_ptr<llvm::MemoryBuffer> bytes;
  DecodedEntry entry; // views into *bytes, verified
  EntryLocation location;
};

struct CorruptFinding {
  std::string path;
  EntryFault fault;
  std::string detail;
  bool moved_aside = false; // false for read-only layers and when the move failed
};

struct LookupResult {
  std::optional<LoadedEntry> hit;
  std::vector<CorruptFinding> corrupt; // bad entries met on the way (each a miss)
};

// Per-key cross-process compile lock (flock on the lock file). An optimisation only: when it
// cannot be taken within the timeout (or at all), acquired() is false and the caller compiles
// anyway. Released by the destructor, or by the kernel when the holder dies.
class CompileLock {
public:
  CompileLock() = default;
  explicit CompileLock(int fd) : m_fd(fd) {}
  CompileLock(CompileLock&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  CompileLock& operator=(CompileLock&& other) noexcept;
  ~CompileLock();
  bool acquired() const { return m_fd >= 0; }

private:
  int m_fd = -1;
};

struct ListedEntry {
  EntryLocation location;
  std::string kernel;
  std::optional<Digest128> key; // from the file name
  uint64_t bytes = 0;
  int64_t last_use_seconds = 0;          // mtime, seconds since the epoch
  std::optional<EntryMetadata> metadata; // nullopt when the entry does not decode
};

struct PruneResult {
  size_t removed = 0;
  size_t failed = 0; // entries that could not be removed (EACCES, EROFS...)
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;
};

struct ClearResult {
  size_t removed = 0; // entries really removed
  size_t failed = 0;  // entries that could not be removed
};

// How a publish treats the disk. Either way readers see the old name or the complete new file
// (rename), never a partial one, while the machine stays up.
enum class Durability {
  // fsync of the file, then of its directory: the entry survives a crash. What a compile
  // publishes: the bytes exist nowhere else.
  durable,
  // No fsync: after a crash the name may hold a torn or empty file, which every reader rejects
  // (checksum, key digest) and moves aside: a miss, repaired by the next publish. For copies of
  // bytes kept elsewhere (an entry fetched from the remote), where waiting for the disk would
  // cost more than fetching them again; and memos that are only ever a shortcut (stat hints).
  relaxed,
};

// What the construction-time checks of the root found (H1). Decided once: a store never
// changes its mind while running (a failing write is reported by publish, nothing more).
enum class RootState {
  writable,  // read and written
  read_only, // cannot be created or written (EACCES, EROFS, ENOTDIR...): read, never written
  refused,   // unsafe (another owner, world-writable without sticky bit) or unset: not touched
};

class DiskStore {
public:
  explicit DiskStore(StoreOptions options);

  const StoreOptions& options() const { return m_options; }
  // False when the root cannot be used for writing; unusable_reason() says why.
  bool writable() const { return m_unusable_reason.empty(); }
  const std::string& unusable_reason() const { return m_unusable_reason; }
  RootState root_state() const { return m_root_state; }
  // False when the root is refused: lookups and listings then see only the read-only layers.
  bool root_readable() const { return m_root_state != RootState::refused; }

  std::string entry_path(const Digest128& key, llvm::StringRef kernel) const;

  // The read-only layers that are never read, and why (decided at construction, warned once).
  const std::vector<RefusedLayer>& refused_layers() const { return m_refused_layers; }
  // Whether a trust key file is configured, and the key when it could be loaded. A configured
  // key that cannot be loaded (trust_key_error()) trusts nothing across a boundary.
  bool trust_key_configured() const { return !m_options.trust_key_file.empty(); }
  const TrustKey* trust_key() const { return m_trust_key ? &*m_trust_key : nullptr; }
  const std::string& trust_key_error() const { return m_trust_key_error; }

  // Root first, then each read-only layer. Bad entries in the root (corrupt, or a directory,
  // link or special file in an entry's or a kernel directory's place) are moved aside.
  LookupResult lookup(const Digest128& key, llvm::StringRef kernel);

  // Why a verified entry read from a read-only layer at `location` is not trusted under the
  // configured key (no tag, a bad tag, no loadable key); nullopt for root entries or no key.
  std::optional<std::string> layer_entry_problem(const EntryLocation& location,
                                                 const Digest128& key,
                                                 llvm::StringRef bytes) const;
  // The entry of `key` in the root, when it is there and verifies (import's conflict check).
  std::optional<LoadedEntry> root_entry(const Digest128& key, llvm::StringRef kernel) const;
  // Atomically writes a small file of the root other than an entry (a dependency manifest:
  // subdir "deps"; stat hints: "hints", best effort and private) through a temp file and the
  // checked directory handles.
  llvm::Error publish_root_file(llvm::StringRef subdir, llvm::StringRef name, llvm::StringRef bytes,
                                Durability durability = Durability::durable, mode_t mode = 0644);

  // Atomically publishes an encoded entry (and, with a trust key, its tag first). Errors
  // (ENOSPC, EACCES, ...) are SpecjitError Errc::io naming the path and errno text; bytes that
  // do not decode under `key` are refused (Errc::invalid_argument). The caller logs them as
  // write_failed and keeps going. No temp file survives a failed publish. Enforces max_bytes
  // afterwards (LRU). `durability` (Durability) says whether it waits for the disk.
  llvm::Error publish(const Digest128& key, llvm::StringRef kernel, llvm::StringRef entry_bytes,
                      Durability durability = Durability::durable);

  CompileLock lock_for_compile(const Digest128& key);

  // Every entry of every layer (or of one kernel), newest use first, metadata decoded.
  std::vector<ListedEntry> list(std::optional<llvm::StringRef> kernel = std::nullopt) const;

  // Fully verifies every entry of the root (and, read-only, of the layers: with a trust key,
  // their tags too); a link, directory or special file where an entry or a kernel directory
  // should be is a finding (not_a_file). With repair, moves bad root things aside, as they are,
  // when the root is writable (moved_aside says which moved). Returns the bad ones.
  std::vector<CorruptFinding> verify(bool repair);

  // Removes least recently used root entries until the root holds at most max_bytes.
  PruneResult prune(uint64_t max_bytes);
  // Removes every root entry (and tags, temp files, quarantine, locks). Says how many entries
  // were really removed and how many could not be; nothing at all when the root is not
  // writable (the caller says so).
  ClearResult clear();
  // Removes temp files older than stale_temp_seconds. Returns how many.
  size_t sweep_stale_temps();

  // Opens <root>/logs/<name> for appending (created 0600, logs/ created 0700). Never through a
  // link, never into a directory or file owned by another user or writable by others, and
  // never in a refused root (nothing is created there). Returns a descriptor the caller owns
  // (O_WRONLY | O_APPEND | O_CLOEXEC); errors name the path and the reason.
  llvm::Expected<int> open_log_for_append(llvm::StringRef name) const;

  // Moves a root entry aside into corrupt/ (no-op for read-only layers). Whatever is at the
  // path (file, link, directory, FIFO) is moved as it is, never followed; its tag is removed.
  bool quarantine(const EntryLocation& location);

private:
  void check_layers();
  void load_trust_key();
  void verify_layer(const Layer& layer, bool repair, std::vector<CorruptFinding>& findings);
  // Moves `name` in `dir` into the root's corrupt/ as it is (file, link, directory...).
  bool move_aside(const DirHandle& dir, llvm::StringRef name);
  // The root's directory for a kernel, made (and repaired) as needed.
  llvm::Expected<DirHandle> kernel_dir_for_publish(llvm::StringRef dir_name);

  StoreOptions m_options;
  std::string m_unusable_reason;
  RootState m_root_state = RootState::writable;
  std::vector<RefusedLayer> m_refused_layers;
  std::optional<TrustKey> m_trust_key;
  std::string m_trust_key_error;
};

} // namespace specjit::cache
