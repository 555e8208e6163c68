// specjit.h: the built-in ops over DLPack-like tensors.
//
// fused_moe with precomputed top-k (router_logits NULL) copies topk_weights and topk_ids into
// the workspace's regions (MoeWorkspaceLayout) with cuMemcpyDtoDAsync on the caller's stream,
// then runs every stage after routing: the op itself stays one code path, and the copy costs
// two small device copies (T x k x 8 bytes).
#include "capi/handles.h"
#include "capi/status.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"
#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/driver.h"
#include "support/error.h"

#include <cstddef>

using namespace specjit;
using namespace specjit::capi;
using runtime::DType;
using runtime::TensorRef;

namespace {

constexpr int k_max_ndim = 4;

// A C tensor as a TensorRef; NULL gives an empty TensorRef when `optional`.
llvm::Expected<TensorRef> tensor_ref(const specjit_tensor* tensor, const char* function,
                                     const char* argument, bool optional = false) {
  if (tensor == nullptr) {
    if (optional)
      return TensorRef{};
    return make_error(Errc::invalid_argument, "{}: {} is NULL", function, argument);
  }
  if (tensor->dtype < SPECJIT_DTYPE_BF16 || tensor->dtype > SPECJIT_DTYPE_U8)
    return make_error(Errc::invalid_argument, "{}: {}: dtype {} is not a specjit_dtype",
                      function, argument, tensor->dtype);
  if (tensor->ndim < 0 || tensor->ndim > k_max_ndim)
    return make_error(Errc::invalid_argument, "{}: {}: ndim {} is not in [0, {}]", function,
                      argument, tensor->ndim, k_max_ndim);
  if (tensor->ndim > 0 && tensor->shape == nullptr)
    return make_error(Errc::invalid_argument, "{}: {}: shape is NULL", function, argument);
  TensorRef ref;
  ref.data = reinterpret_cast<CUdeviceptr>(tensor->data);
  // specjit_dtype and runtime::DType list the same types in the same order.
  ref.dtype = static_cast<DType>(tensor->dtype);
  for (int i = 0; i < tensor->ndim; ++i) {
    if (tensor->shape[i] < 0)
      return make_error(Errc::invalid_argument, "{}: {}: shape[{}] is {}", function, argument, i,
                        tensor->shape[i]);
    ref.shape.push_back(tensor->shape[i]);
    if (tensor->strides != nullptr)
      ref.strides.push_back(tensor->strides[i]);
  }
  return ref;
}

llvm::Error copy_precomputed_topk(runtime::Engine& engine, const ops::MoeShape& shape,
                                  const specjit_moe_args& args, const ops::FusedMoeTensors& t,
                                  CUstream stream) {
  constexpr const char* function = "specjit_op_fused_moe";
  auto weights = tensor_ref(args.topk_weights, function, "topk_weights");
  if (!weights)
    return weights.takeError();
  auto ids = tensor_ref(args.topk_ids, function, "topk_ids");
  if (!ids)
    return ids.takeError();
  if (t.hidden.shape.size() != 2)
    return make_error(Errc::invalid_argument, "{}: hidden_states must be 2-D, not {}", function,
                      t.hidden.describe());
  const int64_t tokens = t.hidden.shape[0];
  if (auto err = runtime::expect_tensor(function, "topk_weights", *weights, DType::f32,
                                        {tokens, shape.top_k}, 4))
    return err;
  if (auto err = runtime::expect_tensor(function, "topk_ids", *ids, DType::i32,
                                        {tokens, shape.top_k}, 4))
    return err;
  const ops::MoeWorkspaceLayout layout = ops::moe_workspace_layout(shape, tokens);
  if (auto err = runtime::expect_tensor(function, "workspace", t.workspace, DType::u8, {-1}, 256))
    return err;
  if (t.workspace.numel() < static_cast<int64_t>(layout.bytes))
    return make_error(Errc::invalid_argument, "{}: workspace: {} bytes, the call needs {}",
                      function, t.workspace.numel(), layout.bytes);
  if (tokens == 0)
    return llvm::Error::success();
  if (auto err = engine.make_context_current())
    return err;
  const runtime::Driver& drv = *runtime::driver(); // the context is current: the driver loaded
  const size_t bytes = static_cast<size_t>(tokens * shape.top_k) * 4;
  if (auto err = drv.check(drv.cuMemcpyDtoDAsync(t.workspace.data + layout.topk_weights,
                                                 weights->data, bytes, stream),
                           "cuMemcpyDtoDAsync"))
    return err;
  return drv.check(
      drv.cuMemcpyDtoDAsync(t.workspace.data + layout.topk_ids, ids->data, bytes, stream),
      "cuMemcpyDtoDAsync");
}

llvm::Expected<ops::MoeShape> moe_shape(int64_t experts, int64_t top_k, int64_t hidden,
                                        int64_t intermediate, bool fp8) {
  ops::MoeShape shape{experts, top_k, hidden, intermediate,
                      fp8 ? ops::MoeDType::fp8 : ops::MoeDType::bf16};
  if (auto err = ops::check_moe_shape(shape))
    return err;
  return shape;
}

llvm::Error fused_moe(specjit_engine* engine, const specjit_moe_args* args, CUstream stream) {
  constexpr const char* function = "specjit_op_fused_moe";
  if (auto err = check_engine(engine, function))
    return err;
  // The first version ended before exact_accumulation.
  constexpr size_t k_first_version = offsetof(specjit_moe_args, exact_accumulation);
  if (auto err = check_struct(args, args ? args->struct_size : 0, k_first_version, function,
                              "args"))
    return err;
  const bool exact = args->struct_size >= offsetof(specjit_moe_args, exact_accumulation) +
                                              sizeof(args->exact_accumulation) &&
                     args->exact_accumulation != 0;
  ops::FusedMoeTensors t;
  struct Field {
    const specjit_tensor* tensor;
    TensorRef* ref;
    const char* name;
    bool optional;
  };
  const Field fields[] = {
      {args->hidden_states, &t.hidden, "hidden_states", false},
      {args->router_logits, &t.router_logits, "router_logits", true},
      {args->w13, &t.w13, "w13", false},
      {args->w2, &t.w2, "w2", false},
      {args->a1_scale, &t.a1_scale, "a1_scale", true},
      {args->w13_scale, &t.w13_scale, "w13_scale", true},
      {args->a2_scale, &t.a2_scale, "a2_scale", true},
      {args->w2_scale, &t.w2_scale, "w2_scale", true},
      {args->out, &t.out, "out", false},
      {args->workspace, &t.workspace, "workspace", false},
  };
  for (const Field& field : fields) {
    auto ref = tensor_ref(field.tensor, function, field.name, field.optional);
    if (!ref)
      return ref.takeError();
    *field.ref = std::move(*ref);
  }
  if (t.hidden.dtype != DType::e4m3 && t.hidden.dtype != DType::bf16)
    return make_error(Errc::invalid_argument, "{}: hidden_states must be e4m3 or bf16, not {}",
                      function, t.hidden.describe());
  auto shape = moe_shape(args->experts, args->top_k, args->hidden, args->intermediate,
                         t.hidden.dtype == DType::e4m3);
  if (!shape)
    return shape.takeError();
  ops::TunedMoeOptions options;
  options.renormalize = args->renormalize != 0;
  options.accumulation = exact ? ops::MoeAccumulation::exact : ops::MoeAccumulation::e4m3;
  runtime::Engine& e = *engine->engine;
  if (args->router_logits == nullptr) {
    if (auto err = copy_precomputed_topk(e, *shape, *args, t, stream))
      return err;
    options.stages = ops::moe_stage_all & ~ops::moe_stage_route;
  }
  return ops::fused_moe(e, *shape, t, options, stream);
}

} // namespace

extern "C" {

specjit_status specjit_op_inv_rope_fp8_quant(specjit_engine* engine, const specjit_tensor* o,
                                             const specjit_tensor* positions,
                                             const specjit_tensor* cos_sin_cache,
                                             const specjit_tensor* out_fp8,
                                             const specjit_tensor* out_scales, int64_t num_groups,
                                             int64_t heads_per_group, void* stream) {
  constexpr const char* function = "specjit_op_inv_rope_fp8_quant";
  if (auto err = check_engine(engine, function))
    return finish(std::move(err));
  const specjit_tensor* tensors[] = {o, positions, cos_sin_cache, out_fp8, out_scales};
  const char* names[] = {"o", "positions", "cos_sin_cache", "out_fp8", "out_scales"};
  TensorRef refs[5];
  for (int i = 0; i < 5; ++i) {
    auto ref = tensor_ref(tensors[i], function, names[i]);
    if (!ref)
      return finish(ref.takeError());
    refs[i] = std::move(*ref);
  }
  if (num_groups < 1 || heads_per_group < 1)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: num_groups ({}) and heads_per_group ({}) must be >= 1", function,
                            num_groups, heads_per_group));
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = num_groups;
  options.heads_per_group = heads_per_group;
  return finish(ops::inv_rope_fp8_quant(*engine->engine, refs[0], refs[1], refs[2], refs[3],
                                        refs[4], options, static_cast<CUstream>(stream)));
}

specjit_status specjit_moe_workspace_bytes(int64_t experts, int64_t top_k, int64_t hidden,
                                           int64_t intermediate, int fp8, int64_t num_tokens,
                                           size_t* out) {
  constexpr const char* function = "specjit_moe_workspace_bytes";
  if (out == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT, fmt::format("{}: out is NULL", function));
  if (num_tokens < 0)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: num_tokens is {}", function, num_tokens));
  auto shape = moe_shape(experts, top_k, hidden, intermediate, fp8 != 0);
  if (!shape)
    return finish(make_error(Errc::invalid_argument, "{}: {}", function,
                             llvm::toString(shape.takeError())));
  *out = ops::moe_workspace_layout(*shape, num_tokens).bytes;
  return finish(llvm::Error::success());
}

specjit_status specjit_op_fused_moe(specjit_engine* engine, const specjit_moe_args* args,
                                    void* stream) {
  return finish(fused_moe(engine, args, static_cast<CUstream>(stream)));
}

} // extern "C"
