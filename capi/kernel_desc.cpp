#include "capi/kernel_desc.h"

#include "support/error.h"

#include <llvm/ADT/StringRef.h>

namespace specjit::capi {

namespace {

constexpr const char* k_function = "specjit_kernel_define";

llvm::Error null_field(const char* field) {
  return make_error(Errc::invalid_argument, "{}: desc->{} is NULL", k_function, field);
}

// A counted array of strings: NULL only when empty, no NULL element.
llvm::Expected<std::vector<std::string>> string_list(const char* const* items, size_t count,
                                                     const char* field) {
  std::vector<std::string> list;
  if (count == 0)
    return list;
  if (items == nullptr)
    return make_error(Errc::invalid_argument, "{}: desc->{} is NULL but its count is {}",
                      k_function, field, count);
  for (size_t i = 0; i < count; ++i) {
    if (items[i] == nullptr)
      return make_error(Errc::invalid_argument, "{}: desc->{}[{}] is NULL", k_function, field, i);
    list.emplace_back(items[i]);
  }
  return list;
}

// Include directories and the architecture are the library's to set.
llvm::Error check_option(llvm::StringRef option) {
  for (llvm::StringRef reserved : {"-I", "--include-path", "-arch", "--gpu-architecture"})
    if (option.startswith(reserved))
      return make_error(Errc::invalid_argument,
                        "{}: option '{}' is set by specjit (include directories go in "
                        "desc->include_dirs; the architecture comes from the device or "
                        "SPECJIT_ARCH)",
                        k_function, option.str());
  return llvm::Error::success();
}

llvm::Expected<std::vector<runtime::ParamDef>> params_from(const specjit_kernel_desc& desc) {
  std::vector<runtime::ParamDef> params;
  if (desc.param_count > 0 && desc.params == nullptr)
    return make_error(Errc::invalid_argument, "{}: desc->params is NULL but param_count is {}",
                      k_function, desc.param_count);
  if (desc.param_count > runtime::k_max_params)
    return make_error(Errc::invalid_argument, "{}: {} parameters; a kernel takes at most {}",
                      k_function, desc.param_count, runtime::k_max_params);
  for (size_t i = 0; i < desc.param_count; ++i) {
    const specjit_param& param = desc.params[i];
    if (param.name == nullptr || param.policy == nullptr)
      return make_error(Errc::invalid_argument, "{}: desc->params[{}].{} is NULL", k_function, i,
                        param.name == nullptr ? "name" : "policy");
    auto policy = runtime::Policy::parse(param.policy);
    if (!policy)
      return make_error(Errc::invalid_argument, "{}: parameter '{}': {}", k_function, param.name,
                        llvm::toString(policy.takeError()));
    params.push_back(runtime::ParamDef::user(param.name, *policy));
  }
  return params;
}

} // namespace

llvm::Expected<runtime::KernelDef> kernel_def_from_desc(const specjit_kernel_desc& desc) {
  if (desc.id == nullptr)
    return null_field("id");
  if (desc.function == nullptr)
    return null_field("function");
  if (desc.source_name == nullptr)
    return null_field("source_name");
  runtime::KernelDef def;
  def.id = desc.id;
  def.function = desc.function;
  switch (desc.source_kind) {
  case SPECJIT_SOURCE_TEXT:
    if (desc.source_text == nullptr)
      return null_field("source_text");
    def.source = runtime::KernelSource::from_text(desc.source_name, desc.source_text);
    break;
  case SPECJIT_SOURCE_FILE: def.source = runtime::KernelSource::from_file(desc.source_name); break;
  case SPECJIT_SOURCE_BUILTIN: def.source = runtime::KernelSource(desc.source_name); break;
  default:
    return make_error(Errc::invalid_argument,
                      "{}: desc->source_kind {} is not a specjit_source_kind (0 text, 1 file, "
                      "2 builtin)",
                      k_function, desc.source_kind);
  }
  auto params = params_from(desc);
  if (!params)
    return params.takeError();
  def.params = std::move(*params);
  auto include_dirs = string_list(desc.include_dirs, desc.include_dir_count, "include_dirs");
  if (!include_dirs)
    return include_dirs.takeError();
  def.include_dirs = std::move(*include_dirs);
  if (desc.header_count > 0 && desc.headers == nullptr)
    return make_error(Errc::invalid_argument, "{}: desc->headers is NULL but header_count is {}",
                      k_function, desc.header_count);
  for (size_t i = 0; i < desc.header_count; ++i) {
    const specjit_header& header = desc.headers[i];
    if (header.name == nullptr || header.text == nullptr)
      return make_error(Errc::invalid_argument, "{}: desc->headers[{}].{} is NULL", k_function, i,
                        header.name == nullptr ? "name" : "text");
    def.headers.push_back(runtime::HeaderText{header.name, header.text});
  }
  auto defines = string_list(desc.defines, desc.define_count, "defines");
  if (!defines)
    return defines.takeError();
  def.defines = std::move(*defines);
  auto options = string_list(desc.options, desc.option_count, "options");
  if (!options)
    return options.takeError();
  for (const std::string& option : *options)
    if (auto err = check_option(option))
      return err;
  def.options = std::move(*options);
  return def;
}

} // namespace specjit::capi
