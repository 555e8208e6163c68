#include "cache/cache_key.h"

#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>

namespace specjit::cache {

namespace {

// Options are hashed and compared in sorted order so that the order a caller (or the
// environment) happens to produce never splits the cache (I2). Duplicates are kept: merging
// them could only make two different requests share a key, never the other way round.
// Callers must therefore pass each option as one token ("--std=c++17", not "--std" "c++17").
std::vector<std::string> sorted_options(const std::vector<std::string>& options) {
  std::vector<std::string> sorted = options;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::string join_options(const std::vector<std::string>& options) {
  std::string text;
  for (const std::string& option : sorted_options(options)) {
    if (!text.empty())
      text += ' ';
    text += option;
  }
  return text;
}

llvm::Error missing_field(llvm::StringRef name) {
  return make_error(Errc::corrupt, "cache key JSON: field '{}' is missing or has the wrong type",
                    name.str());
}

} // namespace

Digest128 cache_key(const CacheKeyInputs& inputs) {
  // One tag per component; FieldHasher frames every field with its length, so no two
  // different inputs can produce the same byte stream.
  FieldHasher hasher;
  hasher.add("format_version", static_cast<int64_t>(inputs.format_version));
  hasher.add("kernel", inputs.kernel);
  hasher.add("source_digest", inputs.source_digest);
  hasher.add("name_expression", inputs.name_expression);
  std::vector<std::string> options = sorted_options(inputs.options);
  hasher.add("options.count", static_cast<int64_t>(options.size()));
  for (const std::string& option : options)
    hasher.add("option", option);
  hasher.add("nvrtc_version", inputs.nvrtc_version);
  hasher.add("arch.major", static_cast<int64_t>(inputs.arch.major));
  hasher.add("arch.minor", static_cast<int64_t>(inputs.arch.minor));
  hasher.add("arch.arch_specific", static_cast<int64_t>(inputs.arch.arch_specific));
  hasher.add("policy_version", static_cast<int64_t>(inputs.policy_version));
  return hasher.finish();
}

llvm::json::Object to_json(const CacheKeyInputs& inputs) {
  llvm::json::Array options;
  for (const std::string& option : inputs.options)
    options.push_back(option);
  return llvm::json::Object{
      {"kernel", inputs.kernel},
      {"source_digest", inputs.source_digest.hex()},
      {"name_expression", inputs.name_expression},
      {"options", std::move(options)},
      {"nvrtc_version", inputs.nvrtc_version},
      {"arch", inputs.arch.name()},
      {"policy_version", static_cast<int64_t>(inputs.policy_version)},
      {"format_version", static_cast<int64_t>(inputs.format_version)},
  };
}

namespace {

llvm::Expected<uint32_t> get_u32(const llvm::json::Object& object, llvm::StringRef name) {
  auto value = object.getInteger(name);
  if (!value || *value < 0 || *value > static_cast<int64_t>(UINT32_MAX))
    return missing_field(name);
  return static_cast<uint32_t>(*value);
}

llvm::Error read_strings(const llvm::json::Object& object, CacheKeyInputs& inputs) {
  auto kernel = object.getString("kernel");
  auto name_expression = object.getString("name_expression");
  auto nvrtc_version = object.getString("nvrtc_version");
  if (!kernel)
    return missing_field("kernel");
  if (!name_expression)
    return missing_field("name_expression");
  if (!nvrtc_version)
    return missing_field("nvrtc_version");
  inputs.kernel = kernel->str();
  inputs.name_expression = name_expression->str();
  inputs.nvrtc_version = nvrtc_version->str();

  const llvm::json::Array* options = object.getArray("options");
  if (!options)
    return missing_field("options");
  for (const llvm::json::Value& option : *options) {
    auto text = option.getAsString();
    if (!text)
      return missing_field("options");
    inputs.options.push_back(text->str());
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<CacheKeyInputs> key_inputs_from_json(const llvm::json::Object& object) {
  CacheKeyInputs inputs;
  if (llvm::Error error = read_strings(object, inputs))
    return error;

  auto digest_text = object.getString("source_digest");
  std::optional<Digest128> digest = digest_text ? Digest128::from_hex(*digest_text) : std::nullopt;
  if (!digest)
    return missing_field("source_digest");
  inputs.source_digest = *digest;

  auto arch_text = object.getString("arch");
  if (!arch_text)
    return missing_field("arch");
  llvm::Expected<Arch> arch = Arch::parse(*arch_text);
  if (!arch)
    return arch.takeError();
  inputs.arch = *arch;

  llvm::Expected<uint32_t> policy_version = get_u32(object, "policy_version");
  if (!policy_version)
    return policy_version.takeError();
  llvm::Expected<uint32_t> format_version = get_u32(object, "format_version");
  if (!format_version)
    return format_version.takeError();
  inputs.policy_version = *policy_version;
  inputs.format_version = *format_version;
  return inputs;
}

std::vector<ComponentDiff> diff_components(const CacheKeyInputs& cached,
                                           const CacheKeyInputs& requested) {
  std::vector<ComponentDiff> diffs;
  auto compare = [&](llvm::StringRef component, std::string cached_text,
                     std::string requested_text) {
    if (cached_text != requested_text)
      diffs.push_back({component.str(), std::move(cached_text), std::move(requested_text)});
  };
  compare("kernel", cached.kernel, requested.kernel);
  compare("source_digest", cached.source_digest.hex(), requested.source_digest.hex());
  compare("name_expression", cached.name_expression, requested.name_expression);
  // Sorted lists joined by spaces: equal exactly when the hashed option lists are equal.
  if (sorted_options(cached.options) != sorted_options(requested.options))
    diffs.push_back({"options", join_options(cached.options), join_options(requested.options)});
  compare("nvrtc_version", cached.nvrtc_version, requested.nvrtc_version);
  // Compared as structs: two different Arch values could in principle print alike.
  if (!(cached.arch == requested.arch))
    diffs.push_back({"arch", cached.arch.name(), requested.arch.name()});
  compare("policy_version", std::to_string(cached.policy_version),
          std::to_string(requested.policy_version));
  compare("format_version", std::to_string(cached.format_version),
          std::to_string(requested.format_version));
  return diffs;
}

} // namespace specjit::cache
