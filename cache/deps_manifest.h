// Dependency manifests: ccache's "direct mode" for kernels with include directories. Per
// definition (keyed by its definition digest) the store keeps the header sets earlier compiles
// read, each header as (include-directory-relative name, directory index, content digest), so a
// fresh process finds its key by re-hashing only the listed headers, never a whole tree.
//
//   <layer>/v1/deps/<definition hex>.json
//   file  = "specjit-deps 1 " checksum-hex "\n" body      checksum: XXH3-128 of body
//   body  = {"definition": hex, "sets": [set, ...]}       newest set first, at most 4
//   set   = [{"name": "cub/block/block_reduce.cuh", "dir": 0, "digest": hex}, ...]  by name
//
// Written temp + rename like entries. A manifest that fails its checksum or does not parse is
// a miss (the next compile writes a good one); the root is read first, then the read-only
// layers. Two processes adding sets at once may lose one of them: that costs one compile later.
#pragma once

#include "cache/disk_store.h"

#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace specjit::cache {

inline constexpr size_t k_max_dependency_sets = 4;

struct HeaderDependency {
  std::string name;         // relative to its include directory, e.g. "cub/util_type.cuh"
  uint32_t include_dir = 0; // index of that directory in the definition's list
  Digest128 digest;         // hash128 of the header's bytes

  friend bool operator==(const HeaderDependency&, const HeaderDependency&) = default;
};
using DependencySet = std::vector<HeaderDependency>; // sorted by name, each name once

std::string encode_deps_manifest(const Digest128& definition, llvm::ArrayRef<DependencySet> sets);
// The file around a body: the header line with the body's checksum, then the body.
std::string frame_deps_manifest(llvm::StringRef body);
// Errc::corrupt for a bad checksum, malformed JSON or another definition's manifest.
llvm::Expected<std::vector<DependencySet>> decode_deps_manifest(llvm::StringRef bytes,
                                                                const Digest128& definition);

// Every stored set of the definition: the root's newest first, then each read-only layer's.
std::vector<DependencySet> read_dependency_sets(const DiskStore& store,
                                                const Digest128& definition);
// Puts `set` first in the root's manifest (dropping an equal older one and any beyond the
// limit). Errc::io when the root cannot be written.
llvm::Error publish_dependency_set(DiskStore& store, const Digest128& definition,
                                   const DependencySet& set);

} // namespace specjit::cache
