// How direct mode reads a definition's headers (header_deps.h): a name relative to the include
// directories resolves as the check defines it (the first directory holding it as a regular
// file, links followed as NVRTC follows them), and its content digest comes from a stat hint
// when the file's status is exactly the recorded one, else from hashing its bytes, which
// records a hint when that is safe (docs/kernels-from-source.md, "Stat hints").
//
// Each include directory is opened once and names are looked up relative to it; a name's first
// component is probed once per directory, so the directories that cannot hold a subtree (the
// source's folder for "cute/...") cost nothing per header. Not thread-safe; one per check.
#pragma once

#include "cache/file_io.h"
#include "cache/stat_hints.h"

#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringMap.h>

#include <chrono>
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
  // The digest of a file a compile read, by the path it spelled; always hashed.
  std::optional<Digest128> hash_path(const std::string& path);

  struct Counts {
    uint64_t probes = 0; // fstatat calls made to resolve names
    uint64_t from_hints = 0;
    uint64_t hashed = 0;
  };
  const Counts& counts() const { return m_counts; }

private:
  std::optional<Resolved> locate(const std::string& name);
  bool may_hold(uint32_t dir, const std::string& name);
  std::optional<Digest128> hash_open(cache::UniqueFd fd);
  bool hint_safe(int fd, const struct stat& st);

  std::vector<cache::UniqueFd> m_dirs;
  std::vector<llvm::StringMap<bool>> m_subtrees; // per directory: first component -> may hold
  llvm::StringMap<std::optional<Resolved>> m_resolved;
  HeaderReaderOptions m_options;
  int64_t m_settled_before_ns = 0;
  llvm::DenseMap<uint64_t, bool> m_hint_file_systems; // device -> its file system keeps ctime
  std::vector<char> m_buffer;
  Counts m_counts;
};

} // namespace specjit::runtime
