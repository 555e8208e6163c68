// The stage ops of the fused MoE layer (routing, grouping), its shape rules and workspace.
#include "ops/moe/detail.h"

#include "runtime/driver.h"

#include "support/error.h"

#include <algorithm>

namespace specjit::ops {

using namespace moe_detail;
using runtime::DType;
using runtime::TensorRef;

namespace {
size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }
// The stage ops' names in their errors.
constexpr llvm::StringLiteral k_route_op = "moe_route", k_align_op = "moe_align",
                              k_pack_op = "moe_pack_weights";
} // namespace

llvm::Error check_moe_shape(const MoeShape& s) { return moe_detail::check_moe_shape(s, k_op); }

llvm::Error moe_detail::check_moe_shape(const MoeShape& s, llvm::StringRef op) {
  if (s.experts < 1 || s.experts > k_align_threads)
    return make_error(Errc::invalid_argument, "{}: experts must be in [1, 1024], got {}", op.str(),
                      s.experts);
  if (s.top_k < 1 || s.top_k > std::min<int64_t>(s.experts, 32))
    return make_error(Errc::invalid_argument, "{}: top_k must be in [1, min(experts, 32)], got {}",
                      op.str(), s.top_k);
  const int64_t values_per_row = 128 / element_bytes(s.dtype);
  for (auto [name, value] : {std::pair<const char*, int64_t>{"hidden", s.hidden},
                             {"intermediate", s.intermediate}})
    if (value < values_per_row || value % values_per_row != 0 || value > (1 << 20))
      return make_error(Errc::invalid_argument,
                        "{}: {} must be a positive multiple of {} ({}), got {}", op.str(), name,
                        values_per_row, moe_dtype_name(s.dtype).str(), value);
  return llvm::Error::success();
}

int64_t moe_max_padded(int64_t slots, int64_t experts, int block_m) {
  return slots + std::min(experts, slots) * (block_m - 1);
}

MoeWorkspaceLayout moe_workspace_layout(const MoeShape& s, int64_t num_tokens) {
  MoeWorkspaceLayout l;
  const int64_t slots = num_tokens * s.top_k;
  l.max_padded = moe_max_padded(slots, s.experts, k_max_block_m);
  size_t at = 0;
  auto take = [&](size_t& field, size_t bytes) {
    field = at;
    at += align256(bytes);
  };
  take(l.topk_weights, slots * 4);
  take(l.topk_ids, slots * 4);
  take(l.sorted_ids, l.max_padded * 4);
  take(l.expert_ids, ceil_div(l.max_padded, k_min_block_m) * 4);
  take(l.num_post_padded, 4);
  // In sorted (padded) order: GEMM2 reads each token block's rows as one box.
  take(l.intermediate, l.max_padded * s.intermediate * element_bytes(s.dtype));
  take(l.slot_out, slots * s.hidden * 2);
  take(l.stream_k, k_stream_k_scratch_bytes);
  l.counter_ints = k_scratch_ints;
  // In token order, or in sorted (padded) order for blocks of up to k_max_f16_tokens_block_m (a
  // GEMM1 stage loads a token block's rows as one box).
  if (s.dtype == MoeDType::fp8) {
    l.tokens_f16_rows = f16_tokens_sorted(s)
                            ? moe_max_padded(slots, s.experts, k_max_f16_tokens_block_m)
                            : num_tokens;
    take(l.tokens_f16, l.tokens_f16_rows * s.hidden * 2);
  }
  l.bytes = at;
  return l;
}

llvm::Error moe_route(runtime::Engine& engine, const TensorRef& logits,
                      const TensorRef& topk_weights, const TensorRef& topk_ids, bool renormalize,
                      CUstream stream) {
  if (auto err = expect("router_logits", logits, DType::f32, {-1, -1}, 4, k_route_op))
    return err;
  const int64_t tokens = logits.shape[0], experts = logits.shape[1];
  if (auto err = expect("topk_weights", topk_weights, DType::f32, {tokens, -1}, 4, k_route_op))
    return err;
  const int64_t top_k = topk_weights.shape[1];
  if (auto err = moe_detail::check_moe_shape({experts, top_k, 128, 128, MoeDType::fp8}, k_route_op))
    return err;
  if (auto err = expect("topk_ids", topk_ids, DType::i32, {tokens, top_k}, 4, k_route_op))
    return err;
  if (tokens == 0)
    return llvm::Error::success();
  return launch_route(engine, route_values(experts, top_k, renormalize, tokens), logits.data,
                      topk_weights.data, topk_ids.data, tokens, stream);
}

std::vector<int64_t> moe_detail::route_values(int64_t experts, int64_t top_k, bool renormalize,
                                              int64_t num_tokens) {
  return {experts, top_k, renormalize ? 1 : 0, num_tokens};
}

llvm::Error moe_detail::launch_route(runtime::Engine& engine, llvm::ArrayRef<int64_t> values,
                                     CUdeviceptr logits, CUdeviceptr topk_weights,
                                     CUdeviceptr topk_ids, int64_t tokens, CUstream stream) {
  runtime::LaunchConfig config;
  config.grid[0] = static_cast<unsigned>(ceil_div(tokens, k_route_warps));
  config.block[0] = k_route_warps * 32;
  config.stream = stream;
  return launch_variant(engine, k_route, values, config, logits, topk_weights, topk_ids,
                        static_cast<int>(tokens));
}

static llvm::Error check_ids_on_host(runtime::Engine& engine, const TensorRef& topk_ids,
                                     int64_t experts, CUstream stream) {
  auto drv = runtime::driver();
  if (!drv)
    return drv.takeError();
  if (auto err = engine.make_context_current())
    return err;
  if (auto err = drv->check(drv->cuStreamSynchronize(stream), "cuStreamSynchronize"))
    return err;
  std::vector<int32_t> host(static_cast<size_t>(topk_ids.numel()));
  if (auto err = drv->check(drv->cuMemcpyDtoH(host.data(), topk_ids.data, host.size() * 4),
                            "cuMemcpyDtoH"))
    return err;
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i] < 0 || host[i] >= experts)
      return make_error(Errc::invalid_argument,
                        "{}: topk_ids: topk_ids[{}] = {} is outside [0, {})", k_align_op.str(), i,
                        host[i], experts);
  return llvm::Error::success();
}

llvm::Error moe_align(runtime::Engine& engine, const TensorRef& topk_ids, int64_t experts,
                      int block_m, const TensorRef& sorted_ids, const TensorRef& expert_ids,
                      const TensorRef& num_post_padded, bool checked, CUstream stream,
                      const TensorRef& zero_counters, MoeSlotOrder order) {
  if (auto err = expect("topk_ids", topk_ids, DType::i32, {-1, -1}, 4, k_align_op))
    return err;
  const int64_t tokens = topk_ids.shape[0], top_k = topk_ids.shape[1];
  if (auto err = moe_detail::check_moe_shape({experts, top_k, 128, 128, MoeDType::fp8}, k_align_op))
    return err;
  if (block_m < 1 || block_m > k_max_block_m)
    return make_error(Errc::invalid_argument, "{}: block_m must be in [1, 256], got {}",
                      k_align_op.str(), block_m);
  const int64_t max_padded = moe_max_padded(tokens * top_k, experts, block_m);
  if (auto err = expect_capacity("sorted_ids", sorted_ids, DType::i32, max_padded, 4, k_align_op))
    return err;
  if (auto err = expect_capacity("expert_ids", expert_ids, DType::i32,
                                 ceil_div(max_padded, block_m), 4, k_align_op))
    return err;
  if (auto err = expect("num_post_padded", num_post_padded, DType::i32, {1}, 4, k_align_op))
    return err;
  const bool zeroing = zero_counters.data != 0;
  if (zeroing)
    if (auto err = expect("zero_counters", zero_counters, DType::i32, {-1}, 4, k_align_op))
      return err;
  if (checked)
    if (auto err = check_ids_on_host(engine, topk_ids, experts, stream))
      return err;
  return launch_align(engine, align_values(experts, block_m, order, tokens), topk_ids.data,
                      sorted_ids.data, expert_ids.data, num_post_padded.data, zero_counters.data,
                      zeroing ? zero_counters.shape[0] : 0, tokens, top_k, stream);
}

llvm::Error moe_detail::launch_align(runtime::Engine& engine, llvm::ArrayRef<int64_t> values,
                                     CUdeviceptr topk_ids, CUdeviceptr sorted_ids,
                                     CUdeviceptr expert_ids, CUdeviceptr num_post_padded,
                                     CUdeviceptr zero_counters, int64_t counters, int64_t tokens,
                                     int64_t top_k, CUstream stream) {
  runtime::LaunchConfig config;
  config.block[0] = k_align_threads;
  config.stream = stream;
  return launch_variant(engine, k_align, values, config, topk_ids, sorted_ids, expert_ids,
                        num_post_padded, zero_counters, static_cast<int>(counters),
                        static_cast<int>(tokens), static_cast<int>(top_k));
}

int64_t moe_packed_weight_offset(int64_t row, int64_t k, int64_t k_bytes) {
  const int64_t r = row % k_moe_piece_rows, chunk = (k % 128 / 16) ^ (r % 8);
  const int64_t piece = row / k_moe_piece_rows * (k_bytes / 128) + k / 128;
  return piece * k_moe_piece_rows * 128 + r * 128 + chunk * 16 + k % 16;
}

llvm::Error moe_pack_weights(runtime::Engine& engine, const TensorRef& weights,
                             const TensorRef& packed, CUstream stream) {
  if (weights.dtype != DType::e4m3 && weights.dtype != DType::bf16)
    return make_error(Errc::invalid_argument, "{}: weights must be e4m3 or bf16, got {}",
                      k_pack_op.str(), weights.describe());
  if (weights.shape.size() != 3)
    return make_error(Errc::invalid_argument, "{}: weights must be [E, N, K], got {}",
                      k_pack_op.str(), weights.describe());
  if (auto err = expect("weights", weights, weights.dtype, {-1, -1, -1}, 16, k_pack_op))
    return err;
  if (auto err = expect("packed", packed, weights.dtype, weights.shape, 16, k_pack_op))
    return err;
  const int64_t rows = weights.shape[0] * weights.shape[1];
  const int64_t k_bytes =
      weights.shape[2] * static_cast<int64_t>(runtime::dtype_size(weights.dtype));
  if (k_bytes % 128 != 0 || weights.shape[1] % k_moe_piece_rows != 0)
    return make_error(Errc::invalid_argument,
                      "{}: weights {} need rows of a multiple of 128 bytes and a multiple of {} "
                      "rows per expert",
                      k_pack_op.str(), weights.describe(), k_moe_piece_rows);
  if (rows >= (int64_t{1} << 31) || k_bytes >= (int64_t{1} << 31))
    return make_error(Errc::invalid_argument, "{}: weights {} are too large", k_pack_op.str(),
                      weights.describe());
  const int64_t bytes = rows * k_bytes;
  if (packed.data < weights.data + bytes && weights.data < packed.data + bytes)
    return make_error(Errc::invalid_argument,
                      "{}: packed must not overlap weights (the packing is not in place)",
                      k_pack_op.str());
  const runtime::LaunchConfig launch =
      grid_stride_launch(bytes / 16, 8, engine.device_facts().multiprocessors, stream);
  return launch_variant(engine, k_pack_weights, {rows}, launch, weights.data, packed.data,
                        static_cast<int>(rows), static_cast<int>(k_bytes));
}

} // namespace specjit::ops
