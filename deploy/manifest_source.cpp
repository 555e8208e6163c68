#include "deploy/manifest_source.h"

#include "runtime/kernel_source.h"

#include "jit/compiler.h"
#include "support/bounded_file.h"

#include <fmt/format.h>

#include <algorithm>

namespace specjit::deploy {

using runtime::canonical_include_dir;
using runtime::KernelDef;
using runtime::KernelSource;
using runtime::ParamDef;
using runtime::Policy;
using runtime::prepare_source;

namespace {

llvm::Expected<std::string> required_string(const ManifestFields& entry, llvm::StringRef field,
                                            llvm::StringRef what) {
  auto text = entry.optional_string(field);
  if (!text)
    return text.takeError();
  if (!*text || (*text)->empty())
    return entry.error(field, fmt::format("missing (expected {})", what.str()));
  return std::move(**text);
}

// "params": [{"name": "num_tokens", "policy": "dynamic"}, ...], in the order the kernel's
// caller passes them; a missing policy is dynamic, as for an integer at run time.
llvm::Error parse_params(const ManifestFields& entry, std::vector<ParamDef>& params) {
  if (auto err = entry.for_each_object("params", [&](const ManifestFields& param) -> llvm::Error {
        if (auto err = param.only({"name", "policy"}))
          return err;
        auto name = required_string(param, "name", "a parameter name such as \"num_tokens\"");
        if (!name)
          return name.takeError();
        auto text = param.optional_string("policy");
        if (!text)
          return text.takeError();
        auto policy = Policy::parse(text->value_or("dynamic"));
        if (!policy)
          return param.error("policy", llvm::toString(policy.takeError()));
        params.push_back(ParamDef::user(std::move(*name), std::move(*policy)));
        return llvm::Error::success();
      }))
    return err;
  if (params.size() > runtime::k_max_params)
    return entry.error("params", fmt::format("{} parameters; a kernel takes at most {}",
                                             params.size(), runtime::k_max_params));
  return llvm::Error::success();
}

// "defines": {"EPS": "1e-6", "TILE": 64, "FAST": null} -> EPS=1e-6, TILE=64, FAST (sorted, so
// that the definition does not depend on the order of the object's keys).
llvm::Error parse_defines(const ManifestFields& entry, std::vector<std::string>& defines) {
  const llvm::json::Value* value = entry.object().get("defines");
  if (value == nullptr)
    return llvm::Error::success();
  const llvm::json::Object* object = value->getAsObject();
  if (object == nullptr)
    return entry.error("defines", fmt::format("expected an object such as {{\"TILE\": 64}}, "
                                              "found {}",
                                              describe_kind(*value)));
  ManifestFields fields = entry.nested(*object, "defines");
  for (const auto& [key, define] : *object) {
    std::string name = key.str();
    if (define.kind() == llvm::json::Value::Null)
      defines.push_back(name);
    else if (auto text = define.getAsString())
      defines.push_back(name + "=" + text->str());
    else if (auto number = define.getAsInteger())
      defines.push_back(fmt::format("{}={}", name, *number));
    else
      return fields.error(name, fmt::format("expected a string, an integer or null (defined "
                                            "without a value), found {}",
                                            describe_kind(define)));
  }
  std::sort(defines.begin(), defines.end());
  return llvm::Error::success();
}

llvm::Error parse_options(const ManifestFields& entry, std::vector<std::string>& options) {
  auto list = entry.optional_strings("options");
  if (!list)
    return list.takeError();
  for (size_t i = 0; *list && i < (*list)->size(); ++i) {
    const std::string& option = (**list)[i];
    if (jit::is_reserved_option(option))
      return entry.error(fmt::format("options[{}]", i),
                         fmt::format("option '{}' is set by specjit (include directories go in "
                                     "\"include_dirs\", defines in \"defines\"; the architecture "
                                     "comes from --arch or the device)",
                                     option));
    options.push_back(option);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error check_manifest_kernel_files(const ManifestFields& entry, const KernelDef& def) {
  if (auto text = read_regular_file(def.source.name, "kernel source", k_max_kernel_source_bytes);
      !text)
    return entry.error("source",
                       fmt::format("kernel {}: {}", def.id, llvm::toString(text.takeError())));
  for (size_t i = 0; i < def.include_dirs.size(); ++i)
    if (auto dir = canonical_include_dir(def.id, def.include_dirs[i]); !dir)
      return entry.error(fmt::format("include_dirs[{}]", i), llvm::toString(dir.takeError()));
  if (auto prepared = prepare_source(def); !prepared)
    return entry.error("source", llvm::toString(prepared.takeError()));
  return llvm::Error::success();
}

llvm::Expected<KernelDef> parse_manifest_kernel(const ManifestFields& entry) {
  if (auto err =
          entry.only({"id", "source", "function", "include_dirs", "defines", "options", "params"}))
    return err;
  KernelDef def;
  auto id = required_string(entry, "id", "a kernel id such as \"rms_norm\"");
  if (!id)
    return id.takeError();
  def.id = std::move(*id);
  auto source = required_string(entry, "source", "the path of the kernel's .cu file");
  if (!source)
    return source.takeError();
  def.source = KernelSource::from_file(entry.resolve_path(*source));
  auto function = required_string(entry, "function", "the kernel's template function");
  if (!function)
    return function.takeError();
  def.function = std::move(*function);
  auto dirs = entry.optional_strings("include_dirs");
  if (!dirs)
    return dirs.takeError();
  for (size_t i = 0; *dirs && i < (*dirs)->size(); ++i) {
    if ((**dirs)[i].empty())
      return entry.error(fmt::format("include_dirs[{}]", i), "an include directory is empty");
    def.include_dirs.push_back(entry.resolve_path((**dirs)[i]));
  }
  if (auto err = parse_params(entry, def.params))
    return err;
  if (auto err = parse_defines(entry, def.defines))
    return err;
  if (auto err = parse_options(entry, def.options))
    return err;
  if (auto err = def.validate())
    return entry.error("", llvm::toString(std::move(err)));
  return def;
}

} // namespace specjit::deploy
