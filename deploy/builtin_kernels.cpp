#include "deploy/builtin_kernels.h"

#include "deploy/reference_models.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"
#include "ops/moe/fused_moe.h"
#include "runtime/test_kernel.h"

#include <set>
#include <string>

namespace specjit::deploy {

using runtime::PolicyKind;

llvm::ArrayRef<KernelDef> builtin_kernels() {
  static const std::vector<KernelDef> kernels = [] {
    std::vector<KernelDef> all = {runtime::scale_tokens_kernel(),
                                  ops::inv_rope_fp8_quant_kernel()};
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
  // Every reference model's variants (deploy/reference_models.h), each variant once.
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

} // namespace specjit::deploy
