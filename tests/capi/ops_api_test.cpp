// The built-in ops through the C ABI (capi/ops_api.cpp): every tensor and size is checked on
// the host before anything is launched, so these run without a GPU.
#include "capi_test_support.h"

#include <cstddef>

using namespace specjit::test;

namespace {

struct Tensor {
  int64_t shape[4] = {0, 0, 0, 0};
  specjit_tensor c{};
  Tensor(void* data, specjit_dtype dtype, std::initializer_list<int64_t> extents) {
    int i = 0;
    for (int64_t extent : extents)
      shape[i++] = extent;
    c = {data, dtype, i, shape, nullptr};
  }
};

void* fake_pointer() { return reinterpret_cast<void*>(uintptr_t{1} << 40); }

} // namespace

TEST_CASE("inv_rope_fp8_quant names the argument that does not fit") {
  CapiEngine engine;
  Tensor o(fake_pointer(), SPECJIT_DTYPE_BF16, {4, 16, 512});
  Tensor positions(fake_pointer(), SPECJIT_DTYPE_I64, {4});
  Tensor cos_sin(fake_pointer(), SPECJIT_DTYPE_F32, {128, 64});
  Tensor out_fp8(fake_pointer(), SPECJIT_DTYPE_E4M3, {2, 4, 8 * 512});
  Tensor scales(fake_pointer(), SPECJIT_DTYPE_F32, {2, 32, 4});
  Tensor wrong_positions(fake_pointer(), SPECJIT_DTYPE_I32, {4});
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(engine.get(), &o.c, &wrong_positions.c, &cos_sin.c,
                                             &out_fp8.c, &scales.c, 2, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("positions"));
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(engine.get(), nullptr, &positions.c, &cos_sin.c,
                                             &out_fp8.c, &scales.c, 2, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("o is NULL"));
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(engine.get(), &o.c, &positions.c, &cos_sin.c,
                                             &out_fp8.c, &scales.c, 0, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("num_groups (0)"));
  Tensor five_d = o;
  five_d.c.ndim = 5;
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(engine.get(), &five_d.c, &positions.c, &cos_sin.c,
                                             &out_fp8.c, &scales.c, 2, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("ndim 5"));
  Tensor bad_dtype = o;
  bad_dtype.c.dtype = 42;
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(engine.get(), &bad_dtype.c, &positions.c,
                                             &cos_sin.c, &out_fp8.c, &scales.c, 2, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("dtype 42"));
  CHECK_STATUS(specjit_op_inv_rope_fp8_quant(nullptr, &o.c, &positions.c, &cos_sin.c,
                                             &out_fp8.c, &scales.c, 2, 8, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(engine.stats().requests == 0); // nothing resolved, nothing launched
}

TEST_CASE("the MoE workspace size is the op's and bad shapes are refused") {
  size_t bytes = 0;
  REQUIRE_OK(specjit_moe_workspace_bytes(8, 2, 4096, 1792, 1, 64, &bytes));
  CHECK(bytes > 64 * 2 * 1792);
  size_t more = 0;
  REQUIRE_OK(specjit_moe_workspace_bytes(8, 2, 4096, 1792, 1, 1024, &more));
  CHECK(more > bytes);
  CHECK_STATUS(specjit_moe_workspace_bytes(8, 2, 4000, 1792, 1, 64, &bytes),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("specjit_moe_workspace_bytes"));
  CHECK_STATUS(specjit_moe_workspace_bytes(8, 2, 4096, 1792, 1, -1, &bytes),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_moe_workspace_bytes(8, 2, 4096, 1792, 1, 64, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("fused_moe checks its argument struct and tensors before launching") {
  CapiEngine engine;
  const int64_t T = 4, E = 8, K = 2, H = 1024, I = 512;
  Tensor hidden(fake_pointer(), SPECJIT_DTYPE_E4M3, {T, H});
  Tensor w13(fake_pointer(), SPECJIT_DTYPE_E4M3, {E, 2 * I, H});
  Tensor w2(fake_pointer(), SPECJIT_DTYPE_E4M3, {E, H, I});
  Tensor out(fake_pointer(), SPECJIT_DTYPE_BF16, {T, H});
  Tensor workspace(fake_pointer(), SPECJIT_DTYPE_U8, {1 << 20});
  Tensor topk_weights(fake_pointer(), SPECJIT_DTYPE_F32, {T, K});
  Tensor topk_ids(fake_pointer(), SPECJIT_DTYPE_I32, {T, 3}); // wrong k
  specjit_moe_args args = sized<specjit_moe_args>();
  args.experts = E;
  args.top_k = K;
  args.hidden = H;
  args.intermediate = I;
  args.renormalize = 1;
  args.hidden_states = &hidden.c;
  args.w13 = &w13.c;
  args.w2 = &w2.c;
  args.out = &out.c;
  args.workspace = &workspace.c;
  args.topk_weights = &topk_weights.c;
  args.topk_ids = &topk_ids.c;

  CHECK_STATUS(specjit_op_fused_moe(engine.get(), nullptr, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("args is NULL"));
  specjit_moe_args small = args;
  small.struct_size = 24;
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &small, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("args->struct_size is 24"));
  // A caller built against the first version (no exact_accumulation) passes the size check.
  specjit_moe_args first = args;
  first.struct_size = offsetof(specjit_moe_args, exact_accumulation);
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &first, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("topk_ids"));
  CHECK_FALSE(last_error_has("struct_size"));
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &args, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("topk_ids"));
  specjit_moe_args no_ids = args;
  no_ids.topk_ids = nullptr;
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &no_ids, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("topk_ids is NULL"));
  Tensor f32_hidden(fake_pointer(), SPECJIT_DTYPE_F32, {T, H});
  specjit_moe_args wrong_dtype = args;
  wrong_dtype.hidden_states = &f32_hidden.c;
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &wrong_dtype, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("hidden_states must be e4m3 or bf16"));
  Tensor ids_ok(fake_pointer(), SPECJIT_DTYPE_I32, {T, K});
  specjit_moe_args small_workspace = args;
  small_workspace.topk_ids = &ids_ok.c;
  Tensor tiny(fake_pointer(), SPECJIT_DTYPE_U8, {256});
  small_workspace.workspace = &tiny.c;
  CHECK_STATUS(specjit_op_fused_moe(engine.get(), &small_workspace, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("workspace"));
  CHECK(engine.stats().requests == 0);
}
