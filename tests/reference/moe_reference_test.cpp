// The MoE CPU references on small shapes: routing and grouping against hand-worked cases, and
// the emulating reference close to the plain fp32 one (it differs only by the quantization
// steps it models).
#include "reference/inv_rope_reference.h"
#include "reference/moe_reference.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace specjit::reference;

namespace {

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

struct Problem {
  int64_t experts = 4, top_k = 2, hidden = 128, intermediate = 64, tokens = 6;
  bool fp8 = true;
  std::vector<uint8_t> x8, w13_8, w2_8;
  std::vector<uint16_t> x16, w13_16, w2_16;
  std::vector<float> w13_scale, w2_scale, logits;

  explicit Problem(bool is_fp8) : fp8(is_fp8) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](int64_t n, float scale, std::vector<uint8_t>& q, std::vector<uint16_t>& b) {
      for (int64_t i = 0; i < n; ++i) {
        float v = u(rng);
        v = v == 0.0f ? 0.5f : v;
        if (fp8)
          q.push_back(float_to_e4m3(v * scale));
        else
          b.push_back(float_to_bf16(v * scale));
      }
    };
    fill(tokens * hidden, fp8 ? 8.0f : 1.0f, x8, x16);
    fill(experts * 2 * intermediate * hidden, fp8 ? 8.0f : 1.0f / std::sqrt(128.0f), w13_8,
         w13_16);
    fill(experts * hidden * intermediate, fp8 ? 8.0f : 1.0f / 8.0f, w2_8, w2_16);
    for (int64_t e = 0; e < experts; ++e) {
      w13_scale.push_back(0.125f / std::sqrt(128.0f) / 8.0f * (1.0f + 0.1f * e));
      w2_scale.push_back(1.0f / 64.0f * (1.0f + 0.05f * e));
    }
    for (int64_t i = 0; i < tokens * experts; ++i)
      logits.push_back(u(rng) * 2.0f);
  }

  MoeWeights weights() const {
    MoeWeights w;
    w.experts = experts;
    w.top_k = top_k;
    w.hidden = hidden;
    w.intermediate = intermediate;
    w.fp8 = fp8;
    w.w13 = fp8 ? static_cast<const void*>(w13_8.data()) : w13_16.data();
    w.w2 = fp8 ? static_cast<const void*>(w2_8.data()) : w2_16.data();
    w.a1_scale = 0.125f;
    w.a2_scale = 1.0f / 64.0f;
    w.w13_scale = w13_scale.data();
    w.w2_scale = w2_scale.data();
    return w;
  }
  const void* x_row(int64_t t) const {
    return fp8 ? static_cast<const void*>(x8.data() + t * hidden) : x16.data() + t * hidden;
  }
};

} // namespace

TEST_CASE("moe routing picks the largest logits, lower expert ids first on ties") {
  const float logits[] = {1.0f, 3.0f, 2.0f, 3.0f};
  MoeRouting r = moe_route(logits, 1, 4, 2, false);
  CHECK(r.ids == std::vector<int32_t>{1, 3});
  const double sum = std::exp(-2.0) + 1 + std::exp(-1.0) + 1;
  CHECK(r.weights[0] == doctest::Approx(1.0 / sum));
  CHECK(r.weights[1] == doctest::Approx(1.0 / sum));
  MoeRouting n = moe_route(logits, 1, 4, 2, true);
  CHECK(n.weights[0] == doctest::Approx(0.5));
  CHECK(n.weights[0] + n.weights[1] == doctest::Approx(1.0));
}

TEST_CASE("moe grouping pads every expert to the block size in slot order") {
  MoeGrouping g = moe_align({2, 0, 2, 1, 2}, 4, 2);
  CHECK(g.sorted_ids == std::vector<int32_t>{1, 5, 3, 5, 0, 2, 4, 5});
  CHECK(g.expert_ids == std::vector<int32_t>{0, 1, 2, 2});
  CHECK(g.num_post_padded == 8);
  MoeGrouping empty = moe_align({}, 8, 16);
  CHECK(empty.num_post_padded == 0);
}

TEST_CASE("silu and bf16 rounding follow their definitions") {
  CHECK(silu_reference(0.0f) == 0.0f);
  CHECK(silu_reference(2.0f) == doctest::Approx(2.0 / (1.0 + std::exp(-2.0))));
  CHECK(round_to_bf16(1.0f + 1.0f / 256.0f) == 1.0f); // half an ulp: tie to even
  CHECK(round_to_bf16(1.0f + 3.0f / 256.0f) == 1.0f + 1.0f / 64.0f);
}

TEST_CASE("the emulating references stay close to the fp32 reference on a small layer") {
  for (bool fp8 : {true, false}) {
    CAPTURE(fp8);
    Problem p(fp8);
    MoeWeights w = p.weights();
    MoeRouting r = moe_route(p.logits.data(), p.tokens, p.experts, p.top_k, true);
    std::vector<float> emulated(p.tokens * p.hidden), exact(p.tokens * p.hidden);
    for (int64_t t = 0; t < p.tokens; ++t) {
      moe_token_emulated(w, p.x_row(t), &r.ids[t * p.top_k], &r.weights[t * p.top_k],
                         &emulated[t * p.hidden]);
      moe_token_fp32(w, p.x_row(t), &r.ids[t * p.top_k], &r.weights[t * p.top_k],
                     &exact[t * p.hidden]);
    }
    double norm = 0;
    for (float v : exact)
      norm += v * v;
    CHECK(norm > 0);
    const double error = relative_error(emulated, exact);
    MESSAGE("relative error of the emulated layer: " << error);
    CHECK(error > 0);
    CHECK(error < (fp8 ? 6e-2 : 1e-2));
    for (float v : emulated)
      CHECK(round_to_bf16(v) == v); // outputs are bf16 values
  }
}

TEST_CASE("the float64 truth is the fp32 reference to float rounding, for both dtypes") {
  for (bool fp8 : {true, false}) {
    CAPTURE(fp8);
    Problem p(fp8);
    MoeWeights w = p.weights();
    MoeRouting r = moe_route(p.logits.data(), p.tokens, p.experts, p.top_k, true);
    std::vector<float> fp32(p.tokens * p.hidden), truth32(p.tokens * p.hidden);
    std::vector<double> truth(p.hidden);
    for (int64_t t = 0; t < p.tokens; ++t) {
      moe_token_fp32(w, p.x_row(t), &r.ids[t * p.top_k], &r.weights[t * p.top_k],
                     &fp32[t * p.hidden]);
      moe_token_truth(w, p.x_row(t), &r.ids[t * p.top_k], &r.weights[t * p.top_k], truth.data());
      for (int64_t h = 0; h < p.hidden; ++h)
        truth32[t * p.hidden + h] = static_cast<float>(truth[h]);
    }
    const double error = relative_error(fp32, truth32);
    MESSAGE("fp32 reference against the float64 truth: " << error);
    CHECK(error > 0); // computed apart: not the same function by accident
    CHECK(error < 1e-6);
  }
}

TEST_CASE("a single expert with weight one is the plain two-layer product") {
  // H = I = 1 would not be a legal kernel shape, but the reference has no such limit.
  const uint16_t x = float_to_bf16(2.0f);
  const uint16_t w13[] = {float_to_bf16(1.0f), float_to_bf16(3.0f)}; // gate 2, up 6
  const uint16_t w2[] = {float_to_bf16(0.5f)};
  MoeWeights w;
  w.experts = 1;
  w.top_k = 1;
  w.hidden = 1;
  w.intermediate = 1;
  w.fp8 = false;
  w.w13 = w13;
  w.w2 = w2;
  const int32_t id = 0;
  const float weight = 1.0f;
  float out = 0;
  moe_token_fp32(w, &x, &id, &weight, &out);
  CHECK(out == doctest::Approx(silu_reference(2.0f) * 6.0f * 0.5f));
}
