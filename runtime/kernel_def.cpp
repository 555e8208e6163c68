#include "runtime/kernel_def.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSet.h>

namespace specjit::runtime {

KernelSource KernelSource::from_text(std::string name, std::string text) {
  KernelSource source;
  source.kind = SourceKind::text;
  source.name = std::move(name);
  source.text = std::move(text);
  return source;
}

KernelSource KernelSource::from_file(std::string path) {
  KernelSource source;
  source.kind = SourceKind::file;
  source.name = std::move(path);
  return source;
}

ParamDef ParamDef::user(std::string name, Policy policy) {
  ParamEncoding encoding =
      policy.kind == PolicyKind::dynamic ? ParamEncoding::none : ParamEncoding::raw;
  return ParamDef{std::move(name), std::move(policy), encoding};
}

std::optional<int64_t> ParamDef::enum_value(llvm::StringRef name) const {
  for (size_t i = 0; i < enum_names.size(); ++i)
    if (enum_names[i] == name)
      return static_cast<int64_t>(i);
  return std::nullopt;
}

namespace {

bool is_identifier(llvm::StringRef text) {
  if (text.empty() || llvm::isDigit(text.front()))
    return false;
  return llvm::all_of(text, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

llvm::Error validate_param(const KernelDef& def, const ParamDef& param) {
  if (!is_identifier(param.name))
    return make_error(Errc::invalid_argument, "kernel {}: parameter name '{}' is not valid",
                      def.id, param.name);
  if (auto err = param.policy.validate())
    return err;
  bool dynamic = param.policy.kind == PolicyKind::dynamic;
  if (param.encoding == ParamEncoding::raw && dynamic)
    return make_error(Errc::invalid_argument,
                      "kernel {}: parameter '{}' is passed as a raw template value, so its "
                      "policy must compile a value in (exact, bucketed or divisibility), not {}",
                      def.id, param.name, param.policy.name());
  if (param.encoding == ParamEncoding::none && !dynamic)
    return make_error(Errc::invalid_argument,
                      "kernel {}: parameter '{}' is no template parameter, so its policy must "
                      "be dynamic, not {}",
                      def.id, param.name, param.policy.name());
  if (param.enum_type.empty() != param.enum_names.empty())
    return make_error(Errc::invalid_argument,
                      "kernel {}: parameter '{}' needs both an enumeration type and its names",
                      def.id, param.name);
  if (!param.is_enum())
    return llvm::Error::success();
  if (param.encoding != ParamEncoding::raw || param.policy.kind != PolicyKind::exact)
    return make_error(Errc::invalid_argument,
                      "kernel {}: enumeration parameter '{}' must be raw and exact", def.id,
                      param.name);
  llvm::SmallVector<llvm::StringRef, 4> scopes;
  llvm::StringRef(param.enum_type).split(scopes, "::");
  if (!llvm::all_of(scopes, is_identifier))
    return make_error(Errc::invalid_argument,
                      "kernel {}: parameter '{}': '{}' is not a qualified type name", def.id,
                      param.name, param.enum_type);
  llvm::StringSet<> names;
  for (const std::string& name : param.enum_names)
    if (!is_identifier(name) || !names.insert(name).second)
      return make_error(Errc::invalid_argument,
                        "kernel {}: parameter '{}': enumerator '{}' is not a plain identifier "
                        "or is named twice",
                        def.id, param.name, name);
  return llvm::Error::success();
}

// Defines reach NVRTC as -D options; a name that is not an identifier would be misread there.
llvm::Error validate_compile_inputs(const KernelDef& def) {
  bool embedded = def.source.kind == SourceKind::embedded;
  if (embedded && (!def.include_dirs.empty() || !def.headers.empty()))
    return make_error(Errc::invalid_argument,
                      "kernel {}: include directories and in-memory headers need a text or file "
                      "source; embedded sources include only kernels_src",
                      def.id);
  for (const std::string& dir : def.include_dirs)
    if (dir.empty())
      return make_error(Errc::invalid_argument, "kernel {}: an include directory is empty",
                        def.id);
  for (const HeaderText& header : def.headers)
    if (header.name.empty())
      return make_error(Errc::invalid_argument, "kernel {}: an in-memory header has no name",
                        def.id);
  for (const std::string& define : def.defines)
    if (!is_identifier(llvm::StringRef(define).split('=').first))
      return make_error(Errc::invalid_argument,
                        "kernel {}: define '{}' must read NAME or NAME=VALUE", def.id, define);
  return llvm::Error::success();
}

} // namespace

llvm::Error KernelDef::validate() const {
  if (!is_identifier(id))
    return make_error(Errc::invalid_argument,
                      "kernel id '{}' must be a plain identifier (letters, digits, _)", id);
  if (source.name.empty() || function.empty())
    return make_error(Errc::invalid_argument, "kernel {}: source and function must be set", id);
  if (params.size() > k_max_params)
    return make_error(Errc::invalid_argument, "kernel {}: at most {} template parameters", id,
                      k_max_params);
  llvm::StringSet<> names;
  for (const ParamDef& param : params) {
    if (auto err = validate_param(*this, param))
      return err;
    if (!names.insert(param.name).second)
      return make_error(Errc::invalid_argument, "kernel {}: parameter '{}' is declared twice", id,
                        param.name);
  }
  return validate_compile_inputs(*this);
}

} // namespace specjit::runtime
