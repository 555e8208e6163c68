// The reference models' manifests (deploy/reference_models.h) and the default manifest built
// from them. No GPU.
#include "deploy/reference_models.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <map>
#include <set>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;

TEST_CASE("every reference model's manifest parses into the variants of its ops") {
  std::map<std::string, std::set<std::string>> kernels;
  for (const ReferenceModel& model : reference_models()) {
    auto variants = reference_model_variants(model.name);
    REQUIRE_MESSAGE(static_cast<bool>(variants), llvm::toString(variants.takeError()));
    CHECK(!variants->empty());
    for (const VariantRequest& request : *variants)
      kernels[model.name].insert(request.def.id);
  }
  for (const char* moe : {"qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v3-tp8"}) {
    INFO(moe);
    // FP8 GEMM1 on wgmma (sm_90a): f16 MMAs or e4m3 ones, as the table's tiles say; bf16 too.
    CHECK((kernels[moe].count("moe_wgmma1_fp8") + kernels[moe].count("moe_wgmma1_e4m3") +
           kernels[moe].count("moe_wgmma1_e4m3w")) >= 1);
    CHECK(kernels[moe].count("moe_wgmma1_bf16") == 1);
    CHECK(kernels[moe].count("moe_route") == 1);
  }
  CHECK(kernels["deepseek-v4-attention"] == std::set<std::string>{"inv_rope_fp8_quant"});
  auto unknown = reference_model_variants("gpt-2");
  REQUIRE_FALSE(static_cast<bool>(unknown));
  ErrorSummary error = summarize(unknown.takeError());
  CHECK(error.code == Errc::not_found);
  CHECK(error.message.find("deepseek-v4-attention") != std::string::npos);
}

TEST_CASE("the default manifest is every reference model's variants, once each, no test kernel") {
  size_t total = 0;
  for (const ReferenceModel& model : reference_models())
    total += reference_model_variants(model.name)->size();
  const std::vector<VariantRequest> defaults = default_variants();
  CHECK(!defaults.empty());
  CHECK(defaults.size() <= total); // a variant two models share is prepared once
  for (const VariantRequest& request : defaults)
    CHECK(request.def.id != "scale_tokens");
}
