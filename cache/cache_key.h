// The disk key: XXH3-128 over tagged components. Every component is stored in the entry's
// metadata too, so a miss can be explained as a diff against the nearest cached variant.
// Never hashed: absolute paths, time stamps, anything from the environment that is unset vs
// default. A cache built in a container build stage hits on any host with the same NVRTC and arch.
#pragma once

#include "support/arch.h"
#include "support/hash.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <cstdint>
#include <string>
#include <vector>

namespace specjit::cache {

inline constexpr uint32_t k_entry_format_version = 1;

struct CacheKeyInputs {
  std::string kernel;               // kernel id, e.g. "inv_rope_fp8_quant"
  Digest128 source_digest;          // source + every project header it includes
  std::string name_expression;      // with template arguments
  std::vector<std::string> options; // NVRTC options; hashed sorted (order never matters)
  std::string nvrtc_version;        // "13.0"
  Arch arch;
  uint32_t policy_version = 0; // version of the specialization policy encoding
  uint32_t format_version = k_entry_format_version;

  friend bool operator==(const CacheKeyInputs&, const CacheKeyInputs&) = default;
};

Digest128 cache_key(const CacheKeyInputs& inputs);

// Component names used in JSON and in diffs: "kernel", "source_digest", "name_expression",
// "options", "nvrtc_version", "arch", "policy_version", "format_version".
llvm::json::Object to_json(const CacheKeyInputs& inputs);
llvm::Expected<CacheKeyInputs> key_inputs_from_json(const llvm::json::Object& object);

struct ComponentDiff {
  std::string component; // one of the names above
  std::string cached;    // the cached variant's value, as text
  std::string requested; // the requested value, as text
};
// The components that differ, in the order above (options compared as sorted sets).
std::vector<ComponentDiff> diff_components(const CacheKeyInputs& cached,
                                           const CacheKeyInputs& requested);

} // namespace specjit::cache
