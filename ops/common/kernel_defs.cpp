#include "ops/common/kernel_defs.h"

namespace specjit::ops::common {

using runtime::ParamDef;
using runtime::ParamEncoding;
using runtime::Policy;

ParamDef raw_param(std::string name) {
  ParamDef param;
  param.name = std::move(name);
  param.policy = Policy::exact();
  param.encoding = ParamEncoding::raw;
  return param;
}

ParamDef spec_param(std::string name, Policy policy) {
  ParamDef param;
  param.name = std::move(name);
  param.policy = std::move(policy);
  param.encoding = ParamEncoding::spec_word;
  return param;
}

ParamDef tokens_param(Policy policy) { return spec_param("num_tokens", std::move(policy)); }

runtime::KernelDef builtin_kernel(std::string id, std::string source,
                                  std::vector<ParamDef> params) {
  runtime::KernelDef def;
  def.function = "specjit_kernels::" + id;
  def.id = std::move(id);
  def.source = std::move(source);
  def.params = std::move(params);
  return def;
}

} // namespace specjit::ops::common
