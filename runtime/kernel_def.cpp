#include "runtime/kernel_def.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSet.h>

namespace specjit::runtime {

namespace {

bool is_identifier(llvm::StringRef text) {
  if (text.empty() || llvm::isDigit(text.front()))
    return false;
  return llvm::all_of(text, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

} // namespace

llvm::Error KernelDef::validate() const {
  if (!is_identifier(id))
    return make_error(Errc::invalid_argument,
                      "kernel id '{}' must be a plain identifier (letters, digits, _)", id);
  if (source.empty() || function.empty())
    return make_error(Errc::invalid_argument, "kernel {}: source and function must be set", id);
  if (params.size() > k_max_params)
    return make_error(Errc::invalid_argument, "kernel {}: at most {} template parameters", id,
                      k_max_params);
  llvm::StringSet<> names;
  for (const ParamDef& param : params) {
    if (!is_identifier(param.name))
      return make_error(Errc::invalid_argument, "kernel {}: parameter name '{}' is not valid", id,
                        param.name);
    if (!names.insert(param.name).second)
      return make_error(Errc::invalid_argument, "kernel {}: parameter '{}' is declared twice", id,
                        param.name);
    if (auto err = param.policy.validate())
      return err;
    bool compile_time_value =
        param.policy.kind == PolicyKind::exact || param.policy.kind == PolicyKind::bucketed;
    if (param.encoding == ParamEncoding::raw && !compile_time_value)
      return make_error(Errc::invalid_argument,
                        "kernel {}: parameter '{}' is passed as a raw template value, so its "
                        "policy must be exact or bucketed, not {}",
                        id, param.name, param.policy.name());
  }
  return llvm::Error::success();
}

} // namespace specjit::runtime
