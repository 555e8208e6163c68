// How direct mode reads a definition's headers (header_deps.h): a name relative to the include
// directories resolves as the check defines it (the first directory holding it as a regular
// file, links followed as NVRTC follows them), and its content digest comes from a stat hint
// when the file's status is exactly the recorded one, else from hashing its bytes, which
// records a hint when that is safe (docs/kernels-from-source.md, "Stat hints").
//
// Each include directory is opened once and names are looked up relative to it; a name's first
// component is probed once per directory, so the directories that cannot hold a subtree (the
// source's folder for "cute/...") cost nothing per header. resolve_all() stats the headers and
// hashes what no hint vouches for on several threads. Not thread-safe itself; one per check.
#pragma once

#include "runtime/header_hash.h"

#include "cache/deps_manifest.h"
#include "cache/file_io.h"
#include "cache/stat_hints.h"

#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringMap.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

enum class HintUse {
  lookup,      // take a digest from a matching hint; record hints for what is hashed
  record_only, // always hash (after a compile, whose reading is the truth); record hints
};

struct HeaderReaderOptions {
  cache::StatHints* hints = nullptr; // none: every header is hashed, nothing is recorded
  HintUse use = HintUse::lookup;
  // A file whose status changed less than this before the reader started gets no hint: a
  // write within the same time-stamp tick as the hashing could leave its status unchanged.
  std::chrono::nanoseconds settle = std::chrono::seconds(2);
  // Threads resolve_all() may stat and hash on, the calling one included. 0: one per 64
  // headers, at most 8 and at most the machine's cores.
  unsigned threads = 0;
};

class HeaderReader {
public:
  HeaderReader(llvm::ArrayRef<std::string> include_dirs, HeaderReaderOptions options = {});

  struct Resolved {
    uint32_t include_dir = 0;
    std::optional<Digest128> digest; // nullopt: found but unreadable
  };
  // nullopt when no include directory holds `name`, or it is not a plain relative name
  // ("a/b.h": no leading '/', no empty, "." or ".." component). Remembered per name.
  std::optional<Resolved> resolve(const std::string& name);
  // resolve() for every header of `set` at once (the same answers), on several threads.
  void resolve_all(const cache::DependencySet& set);
  // The digest of a file a compile read, by the path it spelled; always hashed.
  std::optional<Digest128> hash_path(const std::string& path);

  struct Counts {
    uint64_t probes = 0; // fstatat calls made to resolve names
    uint64_t from_hints = 0;
    uint64_t hashed = 0;
  };
  const Counts& counts() const { return m_counts; }

private:
  struct Found {
    uint32_t include_dir = 0;
    cache::FileStat stat;
  };
  using Memo = llvm::StringMap<std::optional<Resolved>>;
  struct Pending {
    const std::string* name;
    Memo::value_type* entry; // where its answer goes; entries stay put as the map grows
    std::optional<Found> found;
    std::optional<Digest128> hint;
    HashedFile hashed;
  };
  std::optional<Found> find(const std::string& name);
  std::optional<Found> find_known(const std::string& name, uint64_t& probes) const;
  // body(i, hasher) for i < count on up to options.threads threads (this one included).
  void in_parallel(size_t count, const std::function<void(size_t, FileHasher&)>& body);
  bool may_hold(uint32_t dir, const std::string& name);
  // A digest from a hint, or nullopt.
  std::optional<Digest128> hinted(const cache::FileStat& stat);
  int open_in(uint32_t dir, const std::string& name) const;
  // Counts the file as hashed and records a hint for it when that is safe.
  std::optional<Digest128> learn(const HashedFile& hashed);

  std::vector<cache::UniqueFd> m_dirs;
  std::vector<llvm::StringMap<bool>> m_subtrees; // per directory: first component -> may hold
  Memo m_resolved;
  HeaderReaderOptions m_options;
  int64_t m_settled_before_ns = 0;
  FileHasher m_hasher;
  Counts m_counts;
};

} // namespace specjit::runtime
