// MoE routing: softmax over the router logits, top-k experts per token, optional
// renormalization of the k weights (ops/moe/fused_moe.h has the contract).
//
// One warp per token: lane l holds experts l, l + 32, ... The top-k is k rounds of a warp
// argmax on the logits themselves (softmax is monotonic), highest value first and the lowest
// expert id on ties, so the ids are exactly the CPU reference's whatever exp's rounding.
#include "common/spec.cuh"
#include "moe/moe_common.cuh"

namespace specjit_kernels {

namespace moe_route_detail {
inline constexpr int k_warps_per_cta = 8; // the op launches 256-thread CTAs
inline constexpr float k_minus_infinity = -3.4028234663852886e38f; // -FLT_MAX: below every finite logit
} // namespace moe_route_detail

template <int EXPERTS, int TOP_K, int RENORMALIZE, long long NUM_TOKENS_SPEC>
__global__ void __launch_bounds__(moe_route_detail::k_warps_per_cta * 32)
    moe_route(const float* __restrict__ logits, float* __restrict__ topk_weights,
              int* __restrict__ topk_ids, int num_tokens) {
  using namespace moe_route_detail;
  static_assert(TOP_K >= 1 && TOP_K <= EXPERTS && TOP_K <= 32, "1 <= top_k <= min(experts, 32)");
  constexpr int per_lane = (EXPERTS + 31) / 32;
  const long long tokens = Spec<NUM_TOKENS_SPEC>::value(num_tokens);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const long long token =
      static_cast<long long>(blockIdx.x) * k_warps_per_cta + (threadIdx.x >> 5);
  if (token >= tokens)
    return;

  const float* row = logits + token * EXPERTS;
  float v[per_lane];
  float top = k_minus_infinity;
#pragma unroll
  for (int i = 0; i < per_lane; ++i) {
    const int e = i * 32 + lane;
    v[i] = e < EXPERTS ? row[e] : k_minus_infinity;
    top = max_f32(top, v[i]);
  }
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1)
    top = max_f32(top, shfl_xor(top, mask));
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < per_lane; ++i)
    if (i * 32 + lane < EXPERTS)
      sum += exp_approx(v[i] - top);
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1)
    sum += shfl_xor(sum, mask);

  float my_weight = 0.0f; // lane j keeps the j-th weight
  int my_id = 0;
  float selected = 0.0f;
  unsigned taken = 0; // bit i: expert i * 32 + lane already chosen
  constexpr int k_none = 1 << 30;
  for (int j = 0; j < TOP_K; ++j) {
    float best = k_minus_infinity;
    int best_e = k_none;
#pragma unroll
    for (int i = 0; i < per_lane; ++i) {
      const int e = i * 32 + lane;
      if (e < EXPERTS && ((taken >> i) & 1u) == 0 && (best_e == k_none || v[i] > best)) {
        best = v[i];
        best_e = e;
      }
    }
#pragma unroll
    for (int mask = 16; mask >= 1; mask >>= 1) {
      const float other = shfl_xor(best, mask);
      const int other_e = shfl_xor_i32(best_e, mask);
      if (other_e != k_none &&
          (best_e == k_none || other > best || (other == best && other_e < best_e))) {
        best = other;
        best_e = other_e;
      }
    }
#pragma unroll
    for (int i = 0; i < per_lane; ++i)
      if (i * 32 + lane == best_e)
        taken |= 1u << i;
    const float weight = div_rn(exp_approx(best - top), sum);
    selected += weight;
    if (lane == j) {
      my_weight = weight;
      my_id = best_e;
    }
  }
  if (lane < TOP_K) {
    topk_weights[token * TOP_K + lane] = RENORMALIZE ? div_rn(my_weight, selected) : my_weight;
    topk_ids[token * TOP_K + lane] = my_id;
  }
}

} // namespace specjit_kernels
