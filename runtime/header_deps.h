// A definition's header dependencies: which files under its include directories a compile read
// (as include-directory-relative names with content digests, never paths), the source digest
// they give, and the direct-mode check of a stored set against the file system.
#pragma once

#include "runtime/header_reader.h"

#include "cache/deps_manifest.h"
#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/Error.h>

#include <optional>
#include <string>

namespace specjit::runtime {

// Maps each file a compile read (jit::CompiledKernel::included_files) to the first of the
// canonical include directories that holds it, and hashes its bytes (through `reader`, which
// records stat hints when it has them). A file outside every include directory, or one that
// cannot be read, is an error naming it.
llvm::Expected<cache::DependencySet> dependencies_of(llvm::ArrayRef<std::string> included_files,
                                                     llvm::ArrayRef<std::string> include_dirs,
                                                     HeaderReader& reader);
llvm::Expected<cache::DependencySet>
dependencies_of(llvm::ArrayRef<std::string> included_files,
                llvm::ArrayRef<std::string> include_dirs);

// The source digest of a definition with include directories: its definition digest and every
// dependency (name, digest), sorted by name. Directory indices and paths do not enter it, so a
// moved tree keeps the key.
Digest128 dependency_source_digest(const Digest128& definition, const cache::DependencySet& set);

// Why a stored set does not hold any more: the first header whose bytes differ, that is gone,
// or that an earlier include directory now shadows.
struct HeaderChange {
  std::string name;
  std::string cached;    // the stored digest
  std::string requested; // the digest now, "(missing)" or "(now found in include dir N)"
};
// Resolves every header of `set` through the include directories again, in order (the first
// directory holding the name wins) and compares. nullopt: the set holds. With a reader made on
// the same include directories, several sets share what it already resolved and hashed.
std::optional<HeaderChange> check_dependency_set(const cache::DependencySet& set,
                                                 HeaderReader& reader);
std::optional<HeaderChange> check_dependency_set(const cache::DependencySet& set,
                                                 llvm::ArrayRef<std::string> include_dirs);

} // namespace specjit::runtime
