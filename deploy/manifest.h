// Precompile manifests: which variants a deployment needs, as JSON (schema: docs/manifest.md).
//
//   {"version": 1,
//    "kernels": [{"id": "rms_norm", "source": "rms_norm.cu", "function": "rms_norm",
//                 "params": [{"name": "num_tokens", "policy": "dynamic"},
//                            {"name": "hidden", "policy": "exact"}]}],
//    "variants": [{"kernel": "scale_tokens", "values": {"cols": 128, "num_tokens": [1, 2]},
//                  "policies": {"num_tokens": "exact"}},
//                 {"kernel": "rms_norm", "values": {"num_tokens": 1, "hidden": [4096, 7168]}}],
//    "models": [{"type": "inv_rope_fp8_quant", "groups": 8, "heads_per_group": 16}]}
//
// parse_manifest validates everything (kernel names, parameter names, policies, values mapped
// through their policies, the files a "kernels" entry names) before it returns, so a caller
// never starts work on a bad manifest. Errors read
// "FILE:LINE: field 'variants[2].values.num_tokens': expected an integer"; the parser never
// crashes on any input (a fuzz target calls it).
//
// A "kernels" entry defines one of the runtime's own kernels (deploy/manifest_source.h);
// "variants" entries name it by its id like a built-in kernel.
//
// A "models" entry describes a model; a deriver turns it into every variant the model can need.
// Adding a model type (e.g. a MoE {experts, top_k, hidden, intermediate, dtype, tp}) is one
// function plus one row in model_types() (deploy/manifest.cpp).
#pragma once

#include "deploy/builtin_kernels.h"
#include "deploy/manifest_fields.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specjit::deploy {

inline constexpr int64_t k_manifest_version = 1;

// The definition a manifest or a log names: the built-in kernels, plus the test kernel
// scale_tokens; default policies. nullopt for an unknown id.
std::optional<KernelDef> find_kernel_definition(llvm::StringRef id);
// Every id find_kernel_definition knows, for error messages.
std::vector<std::string> known_kernel_ids();

// Appends every variant a model of this type can need.
using ModelDeriver = llvm::Error (*)(const ManifestFields& model, std::vector<VariantRequest>& out);
struct ModelType {
  llvm::StringRef type;
  ModelDeriver derive;
};
llvm::ArrayRef<ModelType> model_types();

// A parsed manifest: the kernels it defines ("kernels", deploy/manifest_source.h) and every
// variant it asks for, of those kernels and of specjit's.
struct Manifest {
  std::vector<KernelDef> kernels;
  std::vector<VariantRequest> variants;
};

// Parses and validates a manifest. Duplicate requests (same kernel, policies and specialized
// values) appear once. Relative paths in it are taken from file_name's folder; the source files
// and include directories of its kernels are checked (read) here, compiled later.
llvm::Expected<Manifest> parse_manifest_document(llvm::StringRef text, llvm::StringRef file_name);
// The variants only.
llvm::Expected<std::vector<VariantRequest>> parse_manifest(llvm::StringRef text,
                                                           llvm::StringRef file_name);

} // namespace specjit::deploy
