#include "handles.h"
#include "launch_args.h"
#include "status.h"

#include <nanobind/stl/string.h>

namespace specjit::python {
namespace {

void inv_rope_fp8_quant(NativeEngine& engine, nb::handle o, nb::handle positions,
                        nb::handle cos_sin_cache, nb::handle out_fp8, nb::handle out_scales,
                        int64_t num_groups, int64_t heads_per_group, nb::handle stream) {
  TensorArg t[5];
  t[0].read(o, "o");
  t[1].read(positions, "positions");
  t[2].read(cos_sin_cache, "cos_sin_cache");
  t[3].read(out_fp8, "out");
  t[4].read(out_scales, "out_scales");
  void* s = resolve_stream(stream);
  nb::gil_scoped_release release;
  check(specjit_op_inv_rope_fp8_quant(engine.handle, t[0].get(), t[1].get(), t[2].get(),
                                      t[3].get(), t[4].get(), num_groups, heads_per_group, s));
}

// `tensors` maps specjit_moe_args' tensor names to descriptors (absent or None: NULL).
void fused_moe(NativeEngine& engine, int64_t experts, int64_t top_k, int64_t hidden,
               int64_t intermediate, bool renormalize, nb::dict tensors, nb::handle stream,
               bool exact_accumulation) {
  static const char* const names[] = {"hidden_states", "router_logits", "topk_weights",
                                      "topk_ids",      "w13",           "w2",
                                      "a1_scale",      "w13_scale",     "a2_scale",
                                      "w2_scale",      "out",           "workspace"};
  TensorArg t[12];
  for (size_t i = 0; i < 12; ++i)
    if (tensors.contains(names[i]))
      t[i].read(tensors[names[i]], names[i]);
  specjit_moe_args a{sizeof a};
  a.experts = experts;
  a.top_k = top_k;
  a.hidden = hidden;
  a.intermediate = intermediate;
  a.renormalize = renormalize;
  a.exact_accumulation = exact_accumulation;
  const specjit_tensor** slots[] = {&a.hidden_states, &a.router_logits, &a.topk_weights,
                                    &a.topk_ids,      &a.w13,           &a.w2,
                                    &a.a1_scale,      &a.w13_scale,     &a.a2_scale,
                                    &a.w2_scale,      &a.out,           &a.workspace};
  for (size_t i = 0; i < 12; ++i)
    *slots[i] = t[i].get();
  void* s = resolve_stream(stream);
  nb::gil_scoped_release release;
  check(specjit_op_fused_moe(engine.handle, &a, s));
}

size_t moe_workspace_bytes(int64_t experts, int64_t top_k, int64_t hidden, int64_t intermediate,
                           bool fp8, int64_t num_tokens) {
  size_t out = 0;
  check(specjit_moe_workspace_bytes(experts, top_k, hidden, intermediate, fp8, num_tokens, &out));
  return out;
}

} // namespace

void TensorArg::read(nb::handle desc, const char* name) {
  if (desc.is_none())
    return;
  if (!nb::isinstance<nb::tuple>(desc) || nb::len(desc) != 4)
    invalid_argument(std::string(name) + ": expected a tensor descriptor");
  nb::tuple d = nb::borrow<nb::tuple>(desc);
  nb::handle dims = d[2], stride = d[3];
  size_t ndim = nb::len(dims);
  if (ndim > 4)
    invalid_argument(std::string(name) + ": " + std::to_string(ndim) + " dimensions, at most 4");
  tensor.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(d[0]));
  tensor.dtype = nb::cast<int>(d[1]);
  tensor.ndim = static_cast<int>(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    shape[i] = nb::cast<int64_t>(dims[i]);
    if (!stride.is_none())
      strides[i] = nb::cast<int64_t>(stride[i]);
  }
  tensor.shape = shape;
  tensor.strides = stride.is_none() ? nullptr : strides;
  present = true;
}

void bind_ops(nb::module_& m) {
  // stream: None means torch's current stream; nanobind refuses None unless an argument says so.
  m.def("op_inv_rope_fp8_quant", &inv_rope_fp8_quant, nb::arg("engine"), nb::arg("o"),
        nb::arg("positions"), nb::arg("cos_sin_cache"), nb::arg("out_fp8"),
        nb::arg("out_scales"), nb::arg("num_groups"), nb::arg("heads_per_group"),
        nb::arg("stream").none());
  m.def("op_fused_moe", &fused_moe, nb::arg("engine"), nb::arg("experts"), nb::arg("top_k"),
        nb::arg("hidden"), nb::arg("intermediate"), nb::arg("renormalize"), nb::arg("tensors"),
        nb::arg("stream").none(), nb::arg("exact_accumulation") = false);
  m.def("moe_workspace_bytes", &moe_workspace_bytes);
}

} // namespace specjit::python
