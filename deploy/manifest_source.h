// The "kernels" section of precompile manifests (docs/manifest.md, "Kernels of your own"): the
// runtime's own kernels, each defined from a source file exactly as a serving process defines it
// at run time (KernelSource::from_file, ParamDef::user), so that both get the same cache keys.
//
//   {"id": "rms_norm", "source": "kernels/rms_norm.cu", "function": "rms_norm",
//    "include_dirs": ["kernels/include"], "defines": {"EPS": "1e-6", "FAST": null},
//    "options": ["--use_fast_math"],
//    "params": [{"name": "num_tokens", "policy": "dynamic"}, {"name": "hidden", "policy":
//    "exact"}]}
#pragma once

#include "deploy/manifest_fields.h"
#include "runtime/kernel_def.h"

#include <llvm/Support/Error.h>

namespace specjit::deploy {

// Sources larger than this are refused (a generated kernel is well under 1 MiB).
inline constexpr uint64_t k_max_kernel_source_bytes = 16ull << 20;

// One kernels[i] entry as a definition; relative paths are taken from the manifest's folder.
// Checks the fields and their types, the policies, the options (no -I or architecture) and the
// definition (KernelDef::validate), with the field's position in every error; touches no file.
llvm::Expected<runtime::KernelDef> parse_manifest_kernel(const ManifestFields& entry);

// Checks the files `def` (parsed from `entry`) names: the source is a readable regular file and
// every include directory can be listed. Done while parsing, so that a manifest naming a missing
// file fails before anything compiles; the engine reads them again when it registers the kernel.
llvm::Error check_manifest_kernel_files(const ManifestFields& entry,
                                       const runtime::KernelDef& def);

} // namespace specjit::deploy
