// The tuned MoE configuration table built into the library: ops/moe/tables/
// moe-configs.json, the table `specjit-bench moe --tune` writes, embedded at build time
// (ops/CMakeLists.txt). It holds entries for the three reference shapes (Qwen3-30B-A3B,
// Mixtral-8x7B, DeepSeek-V3 TP8; FP8), each naming the device it was tuned on: "NVIDIA H200"
// (row-major and packed weights) and "NVIDIA H100 80GB HBM3" (row-major). fused_moe uses it
// unless the caller names another table or none (FusedMoeOptions::table); other shapes, archs
// and devices take the default rule (default_moe_config), which a warning says once per shape
// and device.
#pragma once

#include "ops/moe/config.h"

namespace specjit::ops {

// Parsed once, on first use; never changes afterwards. The embedded text is checked by the tests
// (it parses, and every bucket passes check_moe_config); were it ever unreadable the table would
// be empty, i.e. the default rule everywhere, never a failed call.
const MoeConfigTable& builtin_moe_config_table();

// The embedded JSON text (the tuner's output, byte for byte).
llvm::StringRef builtin_moe_config_table_json();

} // namespace specjit::ops
