#include "tp_startup_data.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include <cmath>

namespace specjit::bench {

namespace {

// e4m3 codes of N(0, sigma^2) values: 5 sigma maps to 448 (beyond saturates, about one value
// in 1.7 million), as a tensor's amax / 448 scale would put it.
constexpr float k_amax_sigmas = 5.0f;

float e4m3_scale(float sigma) { return k_amax_sigmas * sigma / 448.0f; }

CUdeviceptr zeroed(const runtime::Driver& drv, size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  CUdeviceptr p = 0;
  must(drv.check(drv.cuMemAlloc(&p, bytes), "cuMemAlloc"), "buffers");
  must(drv.check(drv.cuMemsetD8(p, 0, bytes), "cuMemsetD8"), "buffers");
  return p;
}

CUdeviceptr allocated(const runtime::Driver& drv, size_t bytes) {
  CUdeviceptr p = 0;
  must(drv.check(drv.cuMemAlloc(&p, std::max<size_t>(bytes, 256)), "cuMemAlloc"), "buffers");
  return p;
}

} // namespace

RopeBuffers::RopeBuffers(const runtime::Driver& driver, DeviceRandom& random, int64_t max_tokens,
                         uint64_t seed, CUstream stream)
    : drv(driver) {
  const auto tokens = static_cast<uint64_t>(max_tokens);
  o = allocated(drv, tokens * heads * 512 * 2);
  random.normal(o, RandomFormat::bf16, tokens * heads * 512, seed + 1, 1.0f, 1.0f, stream);
  positions = allocated(drv, tokens * 8);
  random.uniform_below(positions, tokens, seed + 2, k_tp_rope_max_pos, stream);
  cos_sin = allocated(drv, k_tp_rope_max_pos * 64 * 4);
  random.normal(cos_sin, RandomFormat::f32, k_tp_rope_max_pos * 64, seed + 3, 0.5f, 1.0f, stream);
  out = zeroed(drv, tokens * heads * 512);
  scales = zeroed(drv, heads * 16 * ((tokens + 3) / 4 * 4));
}

RopeBuffers::~RopeBuffers() {
  for (CUdeviceptr p : {o, positions, cos_sin, out, scales})
    if (p)
      drv.cuMemFree(p);
}

llvm::Error RopeBuffers::launch(runtime::Engine& engine, int64_t t, CUstream stream) const {
  using runtime::DType;
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = k_tp_rope_groups;
  options.heads_per_group = k_tp_rope_heads_per_group;
  const int64_t per_group = k_tp_rope_heads_per_group * 512;
  return ops::inv_rope_fp8_quant(
      engine, {o, DType::bf16, {t, heads, 512}, {}}, {positions, DType::i64, {t}, {}},
      {cos_sin, DType::f32, {k_tp_rope_max_pos, 64}, {}},
      {out, DType::e4m3, {k_tp_rope_groups, t, per_group}, {}},
      {scales, DType::f32, {k_tp_rope_groups, k_tp_rope_heads_per_group * 4, (t + 3) / 4 * 4}, {}},
      options, stream);
}

Setup make_device_moe_setup(const runtime::Driver& drv, DeviceRandom& random,
                            const ops::MoeShape& s, int64_t max_tokens, uint64_t seed,
                            CUstream stream) {
  Setup setup;
  setup.max_tokens = max_tokens;
  setup.buffers = std::make_unique<Buffers>(Buffers{drv});
  Buffers& b = *setup.buffers;
  const bool fp8 = s.dtype == ops::MoeDType::fp8;
  const RandomFormat format = fp8 ? RandomFormat::e4m3 : RandomFormat::bf16;
  const size_t elem = fp8 ? 1 : 2;
  // One tensor of `count` N(0, sigma^2) values; its scale (1 for bf16).
  auto draw = [&](CUdeviceptr& p, uint64_t count, float sigma, uint64_t tensor_seed) {
    const float scale = fp8 ? e4m3_scale(sigma) : 1.0f;
    p = allocated(drv, count * elem);
    random.normal(p, format, count, tensor_seed, sigma, scale, stream);
    return scale;
  };
  const auto tokens = static_cast<uint64_t>(max_tokens);
  const auto experts = static_cast<uint64_t>(s.experts);
  const float w13_sigma = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  const float w2_sigma = 1.0f / std::sqrt(static_cast<float>(s.intermediate));
  b.a1_scale = draw(b.x, tokens * s.hidden, 1.0f, seed + 11);
  float w13_scale = 1, w2_scale = 1;
  for (int c = 0; c < k_weight_copies; ++c) { // the same seed: every copy alike
    w13_scale = draw(b.w13[c], experts * 2 * s.intermediate * s.hidden, w13_sigma, seed + 12);
    w2_scale = draw(b.w2[c], experts * s.hidden * s.intermediate, w2_sigma, seed + 13);
  }
  b.a2_scale = fp8 ? 16.0f / 448.0f : 1.0f;
  std::vector<float> scales = {b.a1_scale, b.a2_scale};
  scales.insert(scales.end(), experts, w13_scale);
  scales.insert(scales.end(), experts, w2_scale);
  b.scales = allocated(drv, scales.size() * 4);
  must(drv.check(drv.cuMemcpyHtoD(b.scales, scales.data(), scales.size() * 4), "cuMemcpyHtoD"),
       "scales");
  b.out = zeroed(drv, tokens * s.hidden * 2);
  b.work = zeroed(drv, ops::moe_workspace_layout(s, max_tokens).bytes);
  b.logits = allocated(drv, tokens * experts * 4);
  random.normal(b.logits, RandomFormat::f32, tokens * experts, seed + 14, 1.0f, 1.0f, stream);
  return setup;
}

} // namespace specjit::bench
