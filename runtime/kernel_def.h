// A kernel definition: where its source comes from (embedded, the caller's text or a file),
// which template function, one policy per value the caller passes, and how the source is
// compiled (include directories, in-memory headers, defines, options). Definitions are plain
// data, written next to the op that launches them (deploy/builtin_kernels.cpp lists the
// built-in ones) or built at run time by an embedding program (docs/kernels-from-source.md).
#pragma once

#include "runtime/specialization.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <string>
#include <vector>

namespace specjit::runtime {

// Template parameters of one kernel, at most (one word each in the in-memory variant key).
inline constexpr size_t k_max_params = 12;

enum class SourceKind : uint8_t { embedded, text, file };

struct KernelSource {
  SourceKind kind = SourceKind::embedded;
  std::string name; // embedded: kernels_src-relative name; text: a display name; file: the path
  std::string text; // text only

  KernelSource() = default;
  // Implicit, so that `.source = "x.cu"` keeps naming an embedded source.
  KernelSource(const char* embedded_name) : name(embedded_name) {}
  KernelSource(std::string embedded_name) : name(std::move(embedded_name)) {}
  static KernelSource from_text(std::string name, std::string text);
  // Read when the engine registers the definition; its folder is searched first for includes.
  static KernelSource from_file(std::string path);

  friend bool operator==(const KernelSource&, const KernelSource&) = default;
};

// An in-memory header: `#include "name"` (or <name>) finds it before any include directory.
struct HeaderText {
  std::string name; // as the include spells it, e.g. "my/tile.h"
  std::string text;

  friend bool operator==(const HeaderText&, const HeaderText&) = default;
};

enum class ParamEncoding : uint8_t {
  raw,       // the template argument is the value itself: exact's value, bucketed's bound,
             // divisibility's n (multiple), 0 (not a multiple) or 1 (the value 1, with +one)
  spec_word, // the template argument is SpecValue::word(), decoded by common/spec.cuh
  none,      // not a template parameter (dynamic policy only): a plain kernel argument
};

struct ParamDef {
  std::string name; // as shown in variants and logs, e.g. "num_tokens"
  Policy policy;
  ParamEncoding encoding = ParamEncoding::spec_word;
  // An enumeration template parameter (raw encoding, exact policy): the C++ type the kernel
  // declares it with, e.g. "specjit_kernels::MoeOrientation", and its enumerators' names for the
  // values 0, 1, ... The name expression spells a value as type::name, variants and logs show the
  // name, and a value past the last name is refused.
  std::string enum_type;
  std::vector<std::string> enum_names;

  friend bool operator==(const ParamDef&, const ParamDef&) = default;

  bool is_enum() const { return !enum_names.empty(); }
  // The value of `name` among enum_names; nullopt when it is none of them.
  std::optional<int64_t> enum_value(llvm::StringRef name) const;

  // The rule for kernels brought by the caller (the C ABI's specjit_param): a dynamic value is
  // no template parameter at all, every other policy passes its value raw.
  static ParamDef user(std::string name, Policy policy);
};

struct KernelDef {
  std::string id;                   // stable kernel id, e.g. "inv_rope_fp8_quant"
  KernelSource source;              // e.g. "inv_rope_fp8_quant.cu" (embedded)
  std::string function;             // e.g. "specjit_kernels::inv_rope_fp8_quant"
  std::vector<ParamDef> params;     // one per value the caller passes, in order
  std::vector<std::string> options; // extra NVRTC options (no -I, no architecture)
  // Searched in order after the in-memory headers (text and file sources only). Must exist
  // when the engine registers the definition. Their paths never reach a cache key: what the
  // compile read from them does (docs/kernels-from-source.md, "Keys").
  std::vector<std::string> include_dirs;
  std::vector<HeaderText> headers;  // in-memory headers (text and file sources only)
  std::vector<std::string> defines; // "NAME" or "NAME=VALUE", passed as -D options

  friend bool operator==(const KernelDef&, const KernelDef&) = default;

  // Checked once when the engine registers the definition: a raw parameter must not be
  // dynamic, a none parameter must be, names unique and non-empty, the id a plain identifier,
  // include directories, headers and defines only for text and file sources. Touches no file.
  llvm::Error validate() const;
};

// One variant to make ready: a kernel definition and one value per template parameter
// (a value is mapped through the parameter's policy, like a call's).
struct VariantRequest {
  KernelDef def;
  std::vector<int64_t> values;
};

} // namespace specjit::runtime
