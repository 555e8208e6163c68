#include "runtime/builtin_kernels.h"

#include "runtime/ops/fused_moe.h"
#include "runtime/ops/inv_rope_fp8_quant.h"

#include <llvm/ADT/STLExtras.h>

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
  std::vector<VariantRequest> requests;
  // The test kernel at the width the engine's tests and benchmarks use; num_tokens is dynamic,
  // so any value stands for every value.
  requests.push_back({scale_tokens_kernel(), {128, 1}});
  // inv_rope_fp8_quant for the DeepSeek-V4 attention-output layouts the tests and benchmarks
  // use: 8 groups x 16 heads, and 1 x 1. num_tokens is dynamic: one variant per layout.
  for (auto [groups, heads] : {std::pair<int64_t, int64_t>{8, 16}, {1, 1}})
    requests.push_back({ops::inv_rope_fp8_quant_kernel(), {groups, heads, 1}});
  return requests;
}

} // namespace specjit::runtime
