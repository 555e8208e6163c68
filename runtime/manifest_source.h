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

#include "runtime/kernel_def.h"
#include "runtime/manifest_fields.h"

#include <llvm/Support/Error.h>

namespace specjit::runtime {

// Sources larger than this are refused (a generated kernel is well under 1 MiB).
inline constexpr uint64_t k_max_kernel_source_bytes = 16ull << 20;

// One kernels[i] entry as a definition. Relative paths are taken from the manifest's folder.
// Checked here, with the field's position in every error: the fields and their types, the
// policies, the options (no -I or architecture), the definition (KernelDef::validate), that the
// source is a readable regular file and that every include directory can be listed. Whether the
// id is new is the caller's to check.
llvm::Expected<KernelDef> parse_manifest_kernel(const ManifestFields& entry);

} // namespace specjit::runtime
