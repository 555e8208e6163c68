// A definition's source made ready for compiles, once, when the engine registers it: the file
// read, the include directories checked and canonicalized, defines turned into options, and the
// definition digest that keys everything the definition itself says (docs/kernels-from-source.md).
#pragma once

#include "runtime/kernel_def.h"

#include "jit/compiler.h"
#include "support/hash.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

struct PreparedSource {
  // What every compile of the definition gets; name_expression and arch are per variant.
  // For a file source the program is named by the file's name alone, so that its path never
  // reaches NVRTC's output or the key; its folder is the first include directory.
  jit::CompileRequest request;
  // Embedded: the closure digest (the source digest itself). Otherwise a digest of the kind,
  // program name, text, in-memory headers, defines and the number of include directories:
  // the source digest when there are no include directories, else the anchor the header
  // dependencies (runtime/header_deps.h) are found by.
  Digest128 definition_digest;
  bool has_include_dirs() const { return !request.include_dirs.empty(); }
};

// Errors: Errc::not_found for an unknown embedded source, a missing source file or a missing
// include directory (naming it); Errc::io for one that cannot be read.
llvm::Expected<PreparedSource> prepare_source(const KernelDef& def);

// An include directory as prepare_source keeps it: its real path, after checking that it is a
// directory that can be listed. Errors as prepare_source's, naming the kernel and `dir`.
llvm::Expected<std::string> canonical_include_dir(llvm::StringRef kernel_id, llvm::StringRef dir);

} // namespace specjit::runtime
