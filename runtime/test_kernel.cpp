#include "runtime/test_kernel.h"

namespace specjit::runtime {

KernelDef scale_tokens_kernel(Policy num_tokens_policy) {
  return KernelDef{"scale_tokens",
                   "test/scale_tokens.cu",
                   "specjit_kernels::scale_tokens",
                   {{"cols", Policy::exact(), ParamEncoding::raw},
                    {"num_tokens", std::move(num_tokens_policy), ParamEncoding::spec_word}},
                   {}};
}

} // namespace specjit::runtime
