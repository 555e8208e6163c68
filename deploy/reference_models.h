// The models specjit ships its built-in ops tuned for, by name: what a serving image for one of
// them precompiles (`specjit precompile --model NAME`; all of them are the default manifest,
// what `specjit precompile` prepares when given no manifest). Each is a manifest of its own
// (docs/manifest.md), for the sm_90a devices the built-in table was tuned on, "NVIDIA H200" (FP8
// and bf16) and "NVIDIA H100 80GB HBM3" (FP8):
//   qwen3-30b-a3b          the MoE layer, FP8 and bf16 (E 128, top 8, H 2048, I 768)
//   mixtral-8x7b           the MoE layer, FP8 and bf16 (E 8, top 2, H 4096, I 14336)
//   deepseek-v3-tp8        the MoE layer at 8-way tensor parallelism, FP8 and bf16
//                          (E 256, top 8, H 7168, I 2048 / 8)
//   deepseek-v4-attention  inverse RoPE + FP8 quantization of the attention output,
//                          8 groups x 16 heads and 1 x 1
// Row-major weights; a caller that packs them at load names "weights": "packed" in a manifest
// of its own. No test kernel.
#pragma once

#include "deploy/builtin_kernels.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace specjit::deploy {

struct ReferenceModel {
  const char* name;
  const char* manifest; // its manifest's JSON text
};

llvm::ArrayRef<ReferenceModel> reference_models();

// The variants of the model named `name`; not_found, listing the names, for any other.
llvm::Expected<std::vector<VariantRequest>> reference_model_variants(llvm::StringRef name);

} // namespace specjit::deploy
