#include "reference/moe_reference.h"

#include "reference/inv_rope_reference.h"

#include <algorithm>
#include <cmath>

namespace specjit::reference {

namespace {

// Widened weights of one row: e4m3 codes or bf16 bits -> float.
class Decoder {
public:
  explicit Decoder(bool fp8) : m_fp8(fp8) {
    for (int code = 0; code < 256; ++code)
      m_e4m3[code] = e4m3_to_float(static_cast<uint8_t>(code));
  }
  void row(const void* base, int64_t row, int64_t length, float* out) const {
    if (m_fp8) {
      const uint8_t* p = static_cast<const uint8_t*>(base) + row * length;
      for (int64_t i = 0; i < length; ++i)
        out[i] = m_e4m3[p[i]];
    } else {
      const uint16_t* p = static_cast<const uint16_t*>(base) + row * length;
      for (int64_t i = 0; i < length; ++i)
        out[i] = bf16_to_float(p[i]);
    }
  }

private:
  bool m_fp8;
  float m_e4m3[256];
};

float dot(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

// The shared structure: per slot, GEMM1 -> activation -> (quantize) -> GEMM2 -> weight.
template <bool EMULATE>
void token(const MoeWeights& w, const void* x_row, const int32_t* ids, const float* weights,
           float* out_row) {
  const Decoder decode(w.fp8);
  const int64_t H = w.hidden, I = w.intermediate;
  std::vector<float> x(H), row(std::max(H, I)), h(I);
  decode.row(x_row, 0, H, x.data());
  std::vector<float> sum(H, 0.0f);
  for (int64_t j = 0; j < w.top_k; ++j) {
    const int64_t e = ids[j];
    const float s1 = w.fp8 ? w.a1_scale * w.w13_scale[e] : 1.0f;
    const float s2 = w.fp8 ? w.a2_scale * w.w2_scale[e] : 1.0f;
    for (int64_t n = 0; n < I; ++n) {
      decode.row(w.w13, e * 2 * I + n, H, row.data());
      const float gate = dot(x.data(), row.data(), H) * s1;
      decode.row(w.w13, e * 2 * I + I + n, H, row.data());
      const float up = dot(x.data(), row.data(), H) * s1;
      const float value = silu_reference(gate) * up;
      if (!EMULATE)
        h[n] = value;
      else if (w.fp8)
        h[n] = e4m3_to_float(float_to_e4m3(value * (1.0f / w.a2_scale)));
      else
        h[n] = round_to_bf16(value);
    }
    // fp32: h holds real values; undo the scale GEMM2 applies to the quantized codes.
    const float s2_eff = (!EMULATE && w.fp8) ? w.w2_scale[e] : s2;
    for (int64_t n = 0; n < H; ++n) {
      decode.row(w.w2, e * H + n, I, row.data());
      const float y = (dot(h.data(), row.data(), I) * s2_eff) * weights[j];
      sum[n] += EMULATE ? round_to_bf16(y) : y;
    }
  }
  for (int64_t n = 0; n < H; ++n)
    out_row[n] = EMULATE ? round_to_bf16(sum[n]) : sum[n];
}

} // namespace

float silu_reference(float x) { return x / (1.0f + std::exp(-x)); }

float round_to_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

MoeRouting moe_route(const float* logits, int64_t tokens, int64_t experts, int64_t top_k,
                     bool renormalize) {
  MoeRouting r;
  r.ids.resize(tokens * top_k);
  r.weights.resize(tokens * top_k);
  std::vector<int32_t> order(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * experts;
    const float top = *std::max_element(row, row + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e)
      sum += std::exp(static_cast<double>(row[e]) - top);
    for (int64_t e = 0; e < experts; ++e)
      order[e] = static_cast<int32_t>(e);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    double selected = 0;
    for (int64_t j = 0; j < top_k; ++j) {
      const double p = std::exp(static_cast<double>(row[order[j]]) - top) / sum;
      r.ids[t * top_k + j] = order[j];
      r.weights[t * top_k + j] = static_cast<float>(p);
      selected += p;
    }
    if (renormalize)
      for (int64_t j = 0; j < top_k; ++j)
        r.weights[t * top_k + j] = static_cast<float>(r.weights[t * top_k + j] / selected);
  }
  return r;
}

MoeGrouping moe_align(const std::vector<int32_t>& ids, int64_t experts, int block_m) {
  MoeGrouping g;
  const int32_t slots = static_cast<int32_t>(ids.size());
  std::vector<std::vector<int32_t>> members(experts);
  for (int32_t s = 0; s < slots; ++s)
    if (ids[s] >= 0 && ids[s] < experts)
      members[ids[s]].push_back(s);
  for (int64_t e = 0; e < experts; ++e) {
    const size_t padded = (members[e].size() + block_m - 1) / block_m * block_m;
    for (size_t i = 0; i < padded; ++i)
      g.sorted_ids.push_back(i < members[e].size() ? members[e][i] : slots);
    for (size_t b = 0; b < padded / block_m; ++b)
      g.expert_ids.push_back(static_cast<int32_t>(e));
  }
  g.num_post_padded = static_cast<int32_t>(g.sorted_ids.size());
  return g;
}

void moe_token_emulated(const MoeWeights& w, const void* x_row, const int32_t* ids,
                        const float* weights, float* out_row) {
  token<true>(w, x_row, ids, weights, out_row);
}

void moe_token_truth(const MoeWeights& w, const void* x_row, const int32_t* ids,
                     const float* weights, double* out_row) {
  const Decoder decode(w.fp8); // e4m3 and bf16 values are exact in float, hence in double
  const int64_t H = w.hidden, I = w.intermediate;
  std::vector<float> x(H), row(std::max(H, I));
  std::vector<double> h(I);
  decode.row(x_row, 0, H, x.data());
  auto dot64 = [](const float* a, const float* b, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += static_cast<double>(a[i]) * b[i];
    return sum;
  };
  std::fill(out_row, out_row + H, 0.0);
  for (int64_t j = 0; j < w.top_k; ++j) {
    const int64_t e = ids[j];
    const double s1 = w.fp8 ? static_cast<double>(w.a1_scale) * w.w13_scale[e] : 1.0;
    const double s2 = w.fp8 ? static_cast<double>(w.w2_scale[e]) : 1.0;
    for (int64_t n = 0; n < I; ++n) {
      decode.row(w.w13, e * 2 * I + n, H, row.data());
      const double gate = dot64(x.data(), row.data(), H) * s1;
      decode.row(w.w13, e * 2 * I + I + n, H, row.data());
      const double up = dot64(x.data(), row.data(), H) * s1;
      h[n] = gate / (1.0 + std::exp(-gate)) * up;
    }
    for (int64_t n = 0; n < H; ++n) {
      decode.row(w.w2, e * H + n, I, row.data());
      double sum = 0;
      for (int64_t i = 0; i < I; ++i)
        sum += h[i] * row[i];
      out_row[n] += sum * s2 * weights[j];
    }
  }
}

void moe_token_fp32(const MoeWeights& w, const void* x_row, const int32_t* ids,
                    const float* weights, float* out_row) {
  if (!w.fp8)
    return token<false>(w, x_row, ids, weights, out_row);
  // Dequantized input: x * a1 (the weights' scales are applied per expert inside).
  MoeWeights scaled = w;
  scaled.a2_scale = 1.0f;
  token<false>(scaled, x_row, ids, weights, out_row);
}

} // namespace specjit::reference
