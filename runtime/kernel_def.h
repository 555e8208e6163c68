// A kernel definition: which embedded source, which template function, and one policy per
// template parameter. Definitions are plain data, written next to the op that launches them
// (runtime/builtin_kernels.cpp lists the built-in ones).
#pragma once

#include "runtime/specialization.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace specjit::runtime {

// Template parameters of one kernel, at most (one word each in the in-memory variant key).
inline constexpr size_t k_max_params = 12;

enum class ParamEncoding : uint8_t {
  raw,       // the template argument is the value itself (exact or bucketed policies only)
  spec_word, // the template argument is SpecValue::word(), decoded by common/spec.cuh
};

struct ParamDef {
  std::string name; // as shown in variants and logs, e.g. "num_tokens"
  Policy policy;
  ParamEncoding encoding = ParamEncoding::spec_word;

  friend bool operator==(const ParamDef&, const ParamDef&) = default;
};

struct KernelDef {
  std::string id;                   // stable kernel id, e.g. "inv_rope_fp8_quant"
  std::string source;               // embedded source, e.g. "inv_rope_fp8_quant.cu"
  std::string function;             // e.g. "specjit_kernels::inv_rope_fp8_quant"
  std::vector<ParamDef> params;     // one per template parameter, in order
  std::vector<std::string> options; // extra NVRTC options

  friend bool operator==(const KernelDef&, const KernelDef&) = default;

  // Checked once when the engine registers the definition: a raw parameter must be exact or
  // bucketed, names unique and non-empty, the id a plain identifier.
  llvm::Error validate() const;
};

} // namespace specjit::runtime
