// Hashing one opened header for direct mode (header_reader.h): its status first, then its
// bytes through one small buffer, and whether its file system keeps ctime itself (so that the
// status may vouch for the bytes later, cache/stat_hints.h). One FileHasher per thread.
#pragma once

#include "support/hash.h"

#include <llvm/ADT/DenseMap.h>

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace specjit::runtime {

struct HashedFile {
  std::optional<Digest128> digest; // nullopt: not a regular file, or unreadable
  struct stat status = {};         // taken before the bytes were read
  bool keeps_change_time = false;  // the file's file system sets ctime on every write
};

class FileHasher {
public:
  static constexpr size_t k_read_chunk = 64 * 1024;

  // `fd` is the caller's; negative gives an empty result.
  HashedFile hash(int fd);

private:
  std::optional<Digest128> hash_contents(int fd, size_t size);
  std::optional<size_t> fill(int fd, size_t want);

  std::vector<char> m_buffer;
  llvm::DenseMap<uint64_t, bool> m_file_systems; // device -> keeps ctime
};

} // namespace specjit::runtime
