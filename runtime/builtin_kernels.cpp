#include "runtime/builtin_kernels.h"

#include "runtime/reference_models.h"

#include "runtime/ops/fused_moe.h"
#include "runtime/ops/inv_rope_fp8_quant.h"

#include <llvm/ADT/STLExtras.h>

#include <set>
#include <string>

namespace specjit::runtime {

KernelDef scale_tokens_kernel(Policy num_tokens_policy) {
  return KernelDef{"scale_tokens",
                   "test/scale_tokens.cu",
                   "specjit_kernels::scale_tokens",
                   {{"cols", Policy::exact(), ParamEncoding::raw},
                    {"num_tokens", std::move(num_tokens_policy), ParamEncoding::spec_word}},
                   {}};
}

llvm::ArrayRef<KernelDef> builtin_kernels() {
  static const std::vector<KernelDef> kernels = [] {
    std::vector<KernelDef> all = {scale_tokens_kernel(), ops::inv_rope_fp8_quant_kernel()};
    // The MoE layer's kernels; their variants come from "moe" models in manifests, never from
    // the default manifest (one set per model shape).
    for (KernelDef& def : ops::moe_kernels())
      all.push_back(std::move(def));
    return all;
  }();
  return kernels;
}

const KernelDef* find_builtin_kernel(llvm::StringRef id) {
  for (const KernelDef& def : builtin_kernels())
    if (def.id == id)
      return &def;
  return nullptr;
}

std::vector<VariantRequest> default_variants() {
  // Every reference model's variants (runtime/reference_models.h), each variant once.
  std::vector<VariantRequest> requests;
  std::set<std::string> seen;
  for (const ReferenceModel& model : reference_models()) {
    auto variants = reference_model_variants(model.name);
    if (!variants) { // the catalog's own text, checked by its tests
      llvm::consumeError(variants.takeError());
      continue;
    }
    for (VariantRequest& request : *variants) {
      std::string key = request.def.id;
      for (size_t p = 0; p < request.values.size(); ++p)
        key += "|" + std::to_string(request.def.params[p].policy.kind == PolicyKind::dynamic
                                        ? 0
                                        : request.values[p]);
      if (seen.insert(key).second)
        requests.push_back(std::move(request));
    }
  }
  return requests;
}

} // namespace specjit::runtime
