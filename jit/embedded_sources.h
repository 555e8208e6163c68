// The kernel sources of kernels_src/, embedded into the library at build time
// (cmake/EmbedSources.cmake). Names are paths relative to kernels_src/, e.g.
// "test/scale_tokens.cu" or "common/fp8.cuh". Nothing is read from disk at run time.
#pragma once

#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <optional>

namespace specjit::jit {

struct EmbeddedFile {
  llvm::StringRef name;
  llvm::StringRef text;
};

// Every embedded file (generated).
llvm::ArrayRef<EmbeddedFile> embedded_files();

std::optional<llvm::StringRef> find_embedded(llvm::StringRef name);

// The embedded files a source includes with #include "..." (transitively), the source first.
// An include that names no embedded file is an error naming the includer and the missing name.
llvm::Expected<std::vector<EmbeddedFile>> source_closure(llvm::StringRef name);

// Digest over the closure (tagged by file name): changes when the source or any project header
// it includes changes, and only then.
llvm::Expected<Digest128> source_digest(llvm::StringRef name);

} // namespace specjit::jit
