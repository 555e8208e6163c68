// The include scanner behind source_closure(): which project headers a kernel source pulls in.
// Internal to jit/ (and its tests): it works on any lookup function, so the resolution rules can
// be tested on in-memory texts without touching the embedded table.
//
// Rules:
//   - Only `#include "name"` counts; `#include <...>` is left to NVRTC (kernels are header-free,
//     so such an include fails there, with NVRTC's own message).
//   - Includes inside // and /* */ comments are ignored. Conditional inclusion (#if) is not
//     evaluated: every include the text spells must resolve.
//   - A name resolves relative to the kernels_src root first, then relative to the including
//     file's folder. Names are normalized ("./", "a/../") and may not leave the root.
//   - The result is transitive and de-duplicated, the source first, then headers in the order a
//     depth-first walk of the includes first reaches them. Cycles are fine.
#pragma once

#include "jit/embedded_sources.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <optional>
#include <string>
#include <vector>

namespace specjit::jit {

// Finds a file by its normalized root-relative name. The returned name and text must outlive the
// closure built from them.
using SourceLookup = llvm::function_ref<std::optional<EmbeddedFile>(llvm::StringRef name)>;

struct ClosureFile {
  EmbeddedFile file;
  // Other spellings under which includers reached this file ("helper.cuh" for
  // "test/helper.cuh" included from "test/a.cu"). NVRTC matches in-memory headers by the
  // spelled name only, so compile() registers the header under each of these as well.
  llvm::SmallVector<std::string, 1> aliases;
};

// The names spelled by the `#include "..."` lines of a text, in order, comments skipped.
std::vector<std::string> scan_includes(llvm::StringRef text);

// Errors: Errc::not_found when `name` or an included file does not exist (naming the includer
// and the spelled name); Errc::invalid_argument when one spelling would have to name two
// different files (NVRTC could not tell them apart).
llvm::Expected<std::vector<ClosureFile>> closure_of(llvm::StringRef name, SourceLookup lookup);

// closure_of() over the embedded table (defined in embedded_sources.cpp).
llvm::Expected<std::vector<ClosureFile>> embedded_closure(llvm::StringRef name);

// Digest over the files of a closure, each as tagged (name, text).
Digest128 closure_digest(llvm::ArrayRef<EmbeddedFile> files);

} // namespace specjit::jit
