// The "moe" model type of precompile manifests (docs/manifest.md): every variant a fused MoE
// layer of the given shape can dispatch to, with the default rule or a tuned table.
#pragma once

#include "deploy/manifest.h"

namespace specjit::deploy {

llvm::Error derive_moe_model(const ManifestFields& model, std::vector<VariantRequest>& out);

} // namespace specjit::deploy
