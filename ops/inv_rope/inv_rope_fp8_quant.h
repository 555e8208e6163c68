// Fused inverse RoPE + FP8 quantization (DeepSeek-V4 attention output); the contract is in
// ../shared/KERNELS.md, "Fused inverse RoPE + FP8 quantization":
//   o [T, H, 512] bf16, H = num_groups * heads_per_group; positions [T] i64;
//   cos_sin_cache [max_pos, 64] f32 (32 cos then 32 sin per position);
//   out_fp8 [G, T, heads_per_group * 512] e4m3; out_scales [G, heads_per_group * 4, Ta] f32 with
//   Ta = round_up(T, 4) (MN-major, TMA-aligned; rows t in [T, Ta) written as zero).
// num_tokens is never compiled in under the default policy: one variant serves every T.
#pragma once

#include "runtime/engine.h"
#include "runtime/tensor.h"

namespace specjit::ops {

struct InvRopeFp8QuantOptions {
  int64_t num_groups = 1;
  int64_t heads_per_group = 1;
  // Checked mode copies positions to the host and rejects any outside [0, max_pos).
  bool checked = false;
  // How num_tokens is specialized (benchmarks compare exact, triton and dynamic).
  runtime::Policy num_tokens_policy = runtime::Policy::dynamic();
};

// The kernel definition: template <int GROUPS, int HEADS_PER_GROUP, long long NUM_TOKENS_SPEC>.
runtime::KernelDef inv_rope_fp8_quant_kernel(
    runtime::Policy num_tokens_policy = runtime::Policy::dynamic());

// Validates every argument on the host, then launches on `stream`.
llvm::Error inv_rope_fp8_quant(runtime::Engine& engine, const runtime::TensorRef& o,
                               const runtime::TensorRef& positions,
                               const runtime::TensorRef& cos_sin_cache,
                               const runtime::TensorRef& out_fp8,
                               const runtime::TensorRef& out_scales,
                               const InvRopeFp8QuantOptions& options, CUstream stream);

// Makes the variant a call with these sizes needs ready, without a GPU (precompile, traces).
llvm::Expected<const runtime::Variant*>
prepare_inv_rope_fp8_quant(runtime::Engine& engine, int64_t num_tokens,
                           const InvRopeFp8QuantOptions& options);

} // namespace specjit::ops
