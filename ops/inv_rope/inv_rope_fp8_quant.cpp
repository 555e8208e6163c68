#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include "ops/common/kernel_defs.h"
#include "ops/common/kernel_ids.h"
#include "runtime/driver.h"

#include "support/error.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <vector>

namespace specjit::ops {

using runtime::DType;
using runtime::KernelDef;
using runtime::Policy;
using runtime::TensorRef;

namespace {

constexpr llvm::StringLiteral k_op = "inv_rope_fp8_quant";
constexpr int64_t k_head_dim = 512;
constexpr int64_t k_rope_width = 64; // 32 cos then 32 sin per position
constexpr int64_t k_blocks_per_head = 4;
// Must match inv_rope::k_warps_per_cta and inv_rope::k_max_task_shift in
// kernels_src/inv_rope_fp8_quant.cu: a warp's task is 2^task_shift consecutive tokens of one
// head, task_shift in [0, 3].
constexpr unsigned k_warps_per_cta = 8;
constexpr int k_max_task_shift = 3;
constexpr int k_threads_per_cta = static_cast<int>(k_warps_per_cta) * 32;
// CTAs the GPU holds at once. Occupancy is limited by registers (per-thread count rounded up
// to 8) or threads.
int64_t resident_ctas(int registers, const runtime::DeviceFacts& device) {
  const int per_thread = std::max(8, (registers + 7) / 8 * 8);
  const int per_sm =
      std::max(1, std::min(device.registers_per_multiprocessor / (per_thread * k_threads_per_cta),
                           device.threads_per_multiprocessor / k_threads_per_cta));
  return static_cast<int64_t>(device.multiprocessors) * per_sm;
}

// Tokens per warp task, as a shift: 8 (scale stores fill whole 32-byte sectors) while that gives
// at least half the resident warps a task, else the most that give a quarter of them one (T = 64
// and 128 on the H200: 4 tokens measured faster than 2 or 8), down to 1 token for small T, so no
// warp walks several tokens in sequence there (docs/bench/inv-rope-notes.md, v4).
int task_shift(int64_t tokens, int64_t heads, int64_t resident) {
  const int64_t warps = resident * k_warps_per_cta;
  int shift = k_max_task_shift;
  for (; shift > 0; --shift) {
    const int64_t tasks = ((tokens + (int64_t{1} << shift) - 1) >> shift) * heads;
    if (tasks * (shift == k_max_task_shift ? 2 : 4) >= warps)
      break;
  }
  return shift;
}

// Persistent grid: as many CTAs as the GPU holds at once (the kernel's warps loop over the
// tasks), never more than the tasks need.
unsigned grid_size(int64_t tasks, int64_t resident) {
  const int64_t needed = (tasks + k_warps_per_cta - 1) / k_warps_per_cta;
  // The fewest CTAs that take as many rounds as the resident grid: every warp then gets the
  // same number of tasks (within one), instead of a last round that only some warps work in.
  const int64_t rounds = (needed + resident - 1) / resident;
  return static_cast<unsigned>((needed + rounds - 1) / rounds);
}

int64_t round_up4(int64_t value) { return (value + 3) / 4 * 4; }

llvm::Error check_layout(const InvRopeFp8QuantOptions& options) {
  if (options.num_groups < 1)
    return make_error(Errc::invalid_argument, "{}: num_groups must be >= 1, got {}", k_op.str(),
                      options.num_groups);
  if (options.heads_per_group < 1)
    return make_error(Errc::invalid_argument, "{}: heads_per_group must be >= 1, got {}",
                      k_op.str(), options.heads_per_group);
  // Both are compiled in (exact policy); beyond this a variant would be absurd and the item
  // count of one token would not fit the kernel's 32-bit indices.
  if (options.num_groups * options.heads_per_group > (1 << 16))
    return make_error(Errc::invalid_argument, "{}: {} groups x {} heads per group is too many",
                      k_op.str(), options.num_groups, options.heads_per_group);
  return llvm::Error::success();
}

// Every host-side check of the contract; touches no device.
llvm::Error validate(const TensorRef& o, const TensorRef& positions, const TensorRef& cos_sin_cache,
                     const TensorRef& out_fp8, const TensorRef& out_scales,
                     const InvRopeFp8QuantOptions& options) {
  if (llvm::Error error = check_layout(options))
    return error;
  const int64_t groups = options.num_groups;
  const int64_t heads_per_group = options.heads_per_group;
  const int64_t heads = groups * heads_per_group;
  // 16-byte alignment: the kernel reads `o` and cos/sin and writes fp8 with 16-byte accesses.
  if (llvm::Error error =
          runtime::expect_tensor(k_op, "o", o, DType::bf16, {-1, heads, k_head_dim}, 16))
    return error;
  const int64_t tokens = o.shape[0];
  // The kernel indexes (token, head) items with 32-bit integers.
  if (tokens * heads > std::numeric_limits<int32_t>::max())
    return make_error(Errc::invalid_argument,
                      "{}: o: {} tokens x {} heads exceeds the kernel's 2^31 items", k_op.str(),
                      tokens, heads);
  if (llvm::Error error =
          runtime::expect_tensor(k_op, "positions", positions, DType::i64, {tokens}, 8))
    return error;
  if (llvm::Error error = runtime::expect_tensor(k_op, "cos_sin_cache", cos_sin_cache, DType::f32,
                                                 {-1, k_rope_width}, 16))
    return error;
  if (tokens > 0 && cos_sin_cache.shape[0] == 0)
    return make_error(Errc::invalid_argument, "{}: cos_sin_cache: has no positions (f32[0, 64])",
                      k_op.str());
  if (llvm::Error error =
          runtime::expect_tensor(k_op, "out_fp8", out_fp8, DType::e4m3,
                                 {groups, tokens, heads_per_group * k_head_dim}, 16))
    return error;
  return runtime::expect_tensor(k_op, "out_scales", out_scales, DType::f32,
                                {groups, heads_per_group * k_blocks_per_head, round_up4(tokens)},
                                4);
}

// Copies positions to the host and rejects the first one outside [0, max_pos).
llvm::Error check_positions(runtime::Engine& engine, const TensorRef& positions, int64_t max_pos,
                            CUstream stream) {
  auto drv = runtime::driver();
  if (!drv)
    return drv.takeError();
  if (llvm::Error error = engine.make_context_current())
    return error;
  // The positions may still be being written by earlier work on `stream`.
  if (llvm::Error error = drv->check(drv->cuStreamSynchronize(stream), "cuStreamSynchronize"))
    return error;
  std::vector<int64_t> host(static_cast<size_t>(positions.numel()));
  if (llvm::Error error =
          drv->check(drv->cuMemcpyDtoH(host.data(), positions.data, host.size() * sizeof(int64_t)),
                     "cuMemcpyDtoH"))
    return error;
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i] < 0 || host[i] >= max_pos)
      return make_error(Errc::invalid_argument,
                        "{}: positions: positions[{}] = {} is outside [0, {}) (the rows of "
                        "cos_sin_cache)",
                        k_op.str(), i, host[i], max_pos);
  return llvm::Error::success();
}

// The default (dynamic) definition's id is remembered per thread for the last engine seen
// (common::KernelIds); other policies are registered each call.
llvm::Expected<runtime::KernelId> register_kernel(runtime::Engine& engine, const Policy& policy) {
  if (policy != Policy::dynamic())
    return engine.add_kernel(inv_rope_fp8_quant_kernel(policy));
  thread_local common::KernelIds<1> ids;
  return ids.get(engine, 0, [] {
    static const KernelDef dynamic_def = inv_rope_fp8_quant_kernel(Policy::dynamic());
    return llvm::ArrayRef<KernelDef>(dynamic_def);
  });
}

} // namespace

KernelDef inv_rope_fp8_quant_kernel(Policy num_tokens_policy) {
  return common::builtin_kernel("inv_rope_fp8_quant", "inv_rope_fp8_quant.cu",
                                {common::raw_param("groups"), common::raw_param("heads_per_group"),
                                 common::tokens_param(std::move(num_tokens_policy))});
}

llvm::Error inv_rope_fp8_quant(runtime::Engine& engine, const TensorRef& o,
                               const TensorRef& positions, const TensorRef& cos_sin_cache,
                               const TensorRef& out_fp8, const TensorRef& out_scales,
                               const InvRopeFp8QuantOptions& options, CUstream stream) {
  if (llvm::Error error = validate(o, positions, cos_sin_cache, out_fp8, out_scales, options))
    return error;
  const int64_t tokens = o.shape[0];
  if (tokens == 0)
    return llvm::Error::success(); // Ta == 0 too: not even padding rows to write
  if (options.checked)
    if (llvm::Error error = check_positions(engine, positions, cos_sin_cache.shape[0], stream))
      return error;

  auto kernel = register_kernel(engine, options.num_tokens_policy);
  if (!kernel)
    return kernel.takeError();
  auto variant = engine.get(*kernel, {options.num_groups, options.heads_per_group, tokens});
  if (!variant)
    return variant.takeError();

  const int64_t heads = options.num_groups * options.heads_per_group;
  const int64_t resident = resident_ctas((*variant)->registers, engine.device_facts());
  const int shift = task_shift(tokens, heads, resident);
  const int64_t tasks = ((tokens + (int64_t{1} << shift) - 1) >> shift) * heads;
  runtime::LaunchConfig config;
  config.grid[0] = grid_size(tasks, resident);
  config.block[0] = k_warps_per_cta * 32;
  config.stream = stream;
  return engine.launch(**variant, config, o.data, positions.data, cos_sin_cache.data, out_fp8.data,
                       out_scales.data, static_cast<int>(tokens), shift);
}

llvm::Expected<const runtime::Variant*>
prepare_inv_rope_fp8_quant(runtime::Engine& engine, int64_t num_tokens,
                           const InvRopeFp8QuantOptions& options) {
  if (llvm::Error error = check_layout(options))
    return error;
  if (num_tokens < 0)
    return make_error(Errc::invalid_argument, "{}: num_tokens must be >= 0, got {}", k_op.str(),
                      num_tokens);
  auto kernel = register_kernel(engine, options.num_tokens_policy);
  if (!kernel)
    return kernel.takeError();
  return engine.prepare(*kernel, {options.num_groups, options.heads_per_group, num_tokens});
}

} // namespace specjit::ops
