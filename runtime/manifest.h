// Precompile manifests: which variants a deployment needs, as JSON (schema: docs/manifest.md).
//
//   {"version": 1,
//    "variants": [{"kernel": "scale_tokens", "values": {"cols": 128, "num_tokens": [1, 2]},
//                  "policies": {"num_tokens": "exact"}}],
//    "models": [{"type": "inv_rope_fp8_quant", "groups": 8, "heads_per_group": 16}]}
//
// parse_manifest validates everything (kernel names, parameter names, policies, values mapped
// through their policies) before it returns, so a caller never starts work on a bad manifest.
// Errors read "FILE:LINE: field 'variants[2].values.num_tokens': expected an integer"; the
// parser never crashes on any input (a fuzz target calls it).
//
// A "models" entry describes a model; a deriver turns it into every variant the model can need.
// Adding a model type (e.g. a MoE {experts, top_k, hidden, intermediate, dtype, tp}) is one
// function plus one row in model_types() (runtime/manifest.cpp).
#pragma once

#include "runtime/builtin_kernels.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

inline constexpr int64_t k_manifest_version = 1;

// The definition a manifest or a log names: the built-in kernels, plus the test kernel
// scale_tokens; default policies. nullopt for an unknown id.
std::optional<KernelDef> find_kernel_definition(llvm::StringRef id);
// Every id find_kernel_definition knows, for error messages.
std::vector<std::string> known_kernel_ids();

// Reads the fields of one JSON object of a manifest; every error names the file, the line of
// the field (or of the object when the field is missing) and the field's path.
class ManifestFields {
public:
  ManifestFields(const llvm::json::Object& object, std::string path, std::string file_name,
                 const std::map<std::string, unsigned>* lines)
      : m_object(object), m_path(std::move(path)), m_file(std::move(file_name)), m_lines(lines) {}

  const llvm::json::Object& object() const { return m_object; }
  const std::string& path() const { return m_path; }
  const std::string& file() const { return m_file; } // the manifest's file name, as given
  std::string field_path(llvm::StringRef field) const;

  llvm::Expected<int64_t> integer(llvm::StringRef field, int64_t minimum) const;
  llvm::Expected<std::optional<int64_t>> optional_integer(llvm::StringRef field,
                                                          int64_t minimum) const;
  llvm::Expected<std::optional<std::string>> optional_string(llvm::StringRef field) const;
  // A list of integers, or one integer (a list of one).
  llvm::Expected<std::optional<std::vector<int64_t>>> optional_integers(llvm::StringRef field,
                                                                        int64_t minimum) const;
  // Fails when the object has a field not in `known`.
  llvm::Error only(llvm::ArrayRef<llvm::StringRef> known) const;

  // "FILE:LINE: field 'PATH': MESSAGE" for a field of this object.
  llvm::Error error(llvm::StringRef field, llvm::StringRef message) const;

private:
  unsigned line_of(const std::string& path) const;

  const llvm::json::Object& m_object;
  std::string m_path;
  std::string m_file;
  const std::map<std::string, unsigned>* m_lines;
};

// Appends every variant a model of this type can need.
using ModelDeriver = llvm::Error (*)(const ManifestFields& model, std::vector<VariantRequest>& out);
struct ModelType {
  llvm::StringRef type;
  ModelDeriver derive;
};
llvm::ArrayRef<ModelType> model_types();

// Parses and validates a manifest. Duplicate requests (same kernel, policies and specialized
// values) appear once.
llvm::Expected<std::vector<VariantRequest>> parse_manifest(llvm::StringRef text,
                                                           llvm::StringRef file_name);

} // namespace specjit::runtime
