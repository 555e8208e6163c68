// Internal to cache/: where the disk store keeps things (disk_store.h draws the tree), the
// root safety checks, directory creation that never follows a link, and directory scans.
#pragma once

#include "cache/dir_handle.h"
#include "cache/disk_store.h"
#include "cache/file_io.h"

#include <llvm/Support/MemoryBuffer.h>

#include <optional>
#include <string>
#include <vector>

namespace specjit::cache {

inline constexpr llvm::StringLiteral k_entry_suffix = ".sjc";
inline constexpr llvm::StringLiteral k_tag_suffix = ".sjt";

// The tree of one layer: <layer>/v1/...
class LayerPaths {
public:
  explicit LayerPaths(llvm::StringRef layer_root);
  const std::string& base() const { return m_base; } // <layer>/v1
  std::string entries() const { return m_base + "/entries"; }
  std::string tmp() const { return m_base + "/tmp"; }
  std::string corrupt() const { return m_base + "/corrupt"; }
  std::string locks() const { return m_base + "/locks"; }
  std::string deps() const { return m_base + "/deps"; }
  std::string kernel_dir(llvm::StringRef kernel) const;
  std::string entry(const Digest128& key, llvm::StringRef kernel) const;
  std::string lock(const Digest128& key) const;

private:
  std::string m_base;
};

struct Layer {
  size_t index; // 0: the root; i: readonly_layers[i - 1]
  LayerPaths paths;
  std::string root; // the layer's own directory (the root or readonly_layers[i - 1])
  OwnerRule owners; // who may own its directories
};
// The layers a read may look at, in search order: the root unless it is refused, then the
// read-only layers that are not refused.
std::vector<Layer> readable_layers(const StoreOptions& options, bool root_readable,
                                   const std::vector<RefusedLayer>& refused);

// A verification failure as reported to callers (the entry is not moved here).
CorruptFinding finding_from(const std::string& path, llvm::Error error);

// Kernel ids become directory names: anything but [A-Za-z0-9_.-] (and a leading dot) becomes
// '_', so no id can climb out of entries/ or hide. Collisions are harmless: the key, which
// names the file, covers the real id.
std::string kernel_dir_name(llvm::StringRef kernel);

struct RootCheck {
  RootState state = RootState::writable;
  std::string reason; // empty when writable
};
// The H1 checks: ownership and world-writability of the root (and of <root>/v1), then whether
// it can be created or written.
RootCheck check_root(const std::string& root);

// Creates the root and its missing parents (the root path itself may go through links the user
// set up), then each of `dirs` in order, which must be real directories: a link or a file in
// their place is an error, never followed.
llvm::Error ensure_directories(const std::string& root, llvm::ArrayRef<std::string> dirs);

// True when <layer>/v1 and <layer>/v1/deps are real directories (not links).
bool real_deps_directory(const LayerPaths& layer);

// True when every directory from <layer>/v1 down to the kernel's directory is a real directory
// (not a link), so that opening the entry with O_NOFOLLOW cannot be redirected either.
bool real_directory_chain(const LayerPaths& layer, llvm::StringRef kernel);

struct FileInfo {
  std::string path;
  std::string name;
  std::string dir_name; // the directory holding it (the kernel directory for entries)
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
};
// Entries ("*.sjc" regular files) of a layer, of every kernel or of one.
std::vector<FileInfo> scan_entries(const LayerPaths& layer, std::optional<llvm::StringRef> kernel);
// Every non-directory in `dir` (links included, as links), for sweeping.
std::vector<FileInfo> scan_files(const std::string& dir);

enum class ReadStatus { ok, missing, not_regular, too_large, io_error };
struct ReadFile {
  ReadStatus status = ReadStatus::missing;
  int err = 0;
  std::unique_ptr<llvm::WritableMemoryBuffer> bytes;
  UniqueFd fd; // still open on success, for refreshing the time stamp without a path
  int64_t mtime_ns = 0;
  dev_t device = 0; // identity of the file read, so that a file replaced since is not
  ino_t inode = 0;  // mistaken for it (quarantine must not move a fresh good entry)
};
// Reads a whole entry file, never following a link, never reading more than the file's size or
// k_max_entry_bytes, whichever is smaller.
ReadFile read_entry_file(const std::string& path);

// The same, for the file `name` in an opened directory.
ReadFile read_entry_at(const DirHandle& dir, llvm::StringRef name);

// True when `path` still names the file that was read into `file`.
bool same_file(const ReadFile& file, const std::string& path);
bool same_file_at(const ReadFile& file, const DirHandle& dir, llvm::StringRef name);

// <layer>/v1/entries/<dir_name>, every step opened from the one above (never through a link)
// and checked (dir_handle.h). With create, missing directories are made (0755).
struct KernelDir {
  OpenStatus status = OpenStatus::missing; // of the first step that is not ok
  std::string reason;
  bool at_kernel = false; // whether that step is the kernel directory itself
  DirHandle entries;      // valid once <layer>/v1/entries is open
  DirHandle kernel;       // valid when status is ok
};
KernelDir open_kernel_dir(const std::string& layer_root, OwnerRule rule, llvm::StringRef dir_name,
                          bool create);
// <root>/v1 and <root>/v1/<name> (tmp, corrupt, locks) of the writable root, created when
// missing.
llvm::Expected<DirHandle> open_root_subdir(const std::string& root, llvm::StringRef name);

inline std::string entry_name(const Digest128& key) { return key.hex() + k_entry_suffix.str(); }
inline std::string tag_name(const Digest128& key) { return key.hex() + k_tag_suffix.str(); }
// Why an entry of a read-only layer (`bytes`, in `dir`) is not trusted under the store's trust
// key: no key loadable, no tag, a malformed or a wrong tag. nullopt without a key configured.
std::optional<std::string> tag_problem(const DiskStore& store, const DirHandle& dir,
                                       const Digest128& key, llvm::StringRef bytes);

// A name part no other writer (thread or process, on any host sharing the directory) picks.
std::string unique_suffix();
int64_t now_ns();

} // namespace specjit::cache
