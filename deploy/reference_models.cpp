#include "deploy/reference_models.h"

#include "deploy/manifest.h"

#include "support/error.h"

#include <fmt/format.h>

namespace specjit::deploy {

namespace {

// One MoE model's manifest: its layer in FP8 and bf16 on the H200, and in FP8 on the H100 (the
// built-in table's devices; bf16 has no entries, and the default rule's bf16 tiles are the same
// on both, of 132 SMs).
#define SPECJIT_MOE_MODEL(SHAPE)                                                                   \
  "{\"version\": 1, \"models\": [{\"type\": \"moe\", " SHAPE ", \"dtype\": \"fp8\", "              \
  "\"device\": \"NVIDIA H200\"}, {\"type\": \"moe\", " SHAPE ", \"dtype\": \"bf16\", "             \
  "\"device\": \"NVIDIA H200\"}, {\"type\": \"moe\", " SHAPE ", \"dtype\": \"fp8\", "              \
  "\"device\": \"NVIDIA H100 80GB HBM3\"}]}"

constexpr ReferenceModel k_models[] = {
    {"qwen3-30b-a3b",
     SPECJIT_MOE_MODEL(R"("experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768)")},
    {"mixtral-8x7b",
     SPECJIT_MOE_MODEL(R"("experts": 8, "top_k": 2, "hidden": 4096, "intermediate": 14336)")},
    {"deepseek-v3-tp8",
     SPECJIT_MOE_MODEL(
         R"("experts": 256, "top_k": 8, "hidden": 7168, "intermediate": 2048, "tp": 8)")},
    // num_tokens is dynamic: one variant per layout serves every count.
    {"deepseek-v4-attention",
     R"({"version": 1, "variants": [
          {"kernel": "inv_rope_fp8_quant",
           "values": {"groups": 8, "heads_per_group": 16, "num_tokens": 1}},
          {"kernel": "inv_rope_fp8_quant",
           "values": {"groups": 1, "heads_per_group": 1, "num_tokens": 1}}]})"},
};

#undef SPECJIT_MOE_MODEL

} // namespace

llvm::ArrayRef<ReferenceModel> reference_models() { return k_models; }

llvm::Expected<std::vector<VariantRequest>> reference_model_variants(llvm::StringRef name) {
  std::string names;
  for (const ReferenceModel& model : k_models) {
    if (name == model.name)
      return parse_manifest(model.manifest, fmt::format("<model {}>", model.name));
    names += fmt::format("{}{}", names.empty() ? "" : ", ", model.name);
  }
  return make_error(Errc::not_found, "no reference model '{}'; the models are {}", name.str(),
                    names);
}

} // namespace specjit::deploy
