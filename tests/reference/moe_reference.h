// CPU references of the fused MoE layer (../../shared/KERNELS.md, "Fused MoE";
// ops/moe/fused_moe.h):
//   - route / align: exactly what the kernels produce (ids; slots grouped by expert in
//     ascending slot order, which the GPU's order matches up to a permutation inside a segment);
//   - emulated: the kernels' quantization steps with fp32 math (double accumulation): e4m3
//     intermediate through the static scale a2, scales applied after the K loop in the kernels'
//     order, per-slot outputs rounded to bf16, the k slots summed in fp32 and rounded to bf16;
//   - fp32: dequantize everything, fp32 math, no intermediate quantization or rounding;
//   - truth: the same in float64 throughout, the layer's function on the dequantized FP8
//     operands, the measure of the accuracy rule (docs/moe.md, "Accumulation").
// Per-token functions, so tests can check a sample of rows of a large problem.
#pragma once

#include <cstdint>
#include <vector>

namespace specjit::reference {

struct MoeRouting {
  std::vector<int32_t> ids;   // [T * k]
  std::vector<float> weights; // [T * k]
};
// Softmax over logits [T, E], the k largest logits (ties: lower expert id first), the weights
// p_e (renormalized to sum to 1 over the k when asked).
MoeRouting moe_route(const float* logits, int64_t tokens, int64_t experts, int64_t top_k,
                     bool renormalize);

struct MoeGrouping {
  std::vector<int32_t> sorted_ids; // [num_post_padded]; padding = number of slots
  std::vector<int32_t> expert_ids; // [num_post_padded / block_m]
  int32_t num_post_padded = 0;
};
MoeGrouping moe_align(const std::vector<int32_t>& ids, int64_t experts, int block_m);

// One layer's weights as the kernels see them: e4m3 codes (fp8) or bf16 bit patterns.
struct MoeWeights {
  int64_t experts = 0, top_k = 0, hidden = 0, intermediate = 0;
  bool fp8 = true;
  const void* w13 = nullptr; // [E, 2I, H]
  const void* w2 = nullptr;  // [E, H, I]
  float a1_scale = 1.0f, a2_scale = 1.0f;
  const float* w13_scale = nullptr; // [E] (fp8)
  const float* w2_scale = nullptr;  // [E] (fp8)
};

// out_row[H] for one token: x_row (H e4m3 codes or bf16 bits), its k ids and weights.
// emulated: the values of the bf16 outputs; fp32: unrounded.
void moe_token_emulated(const MoeWeights& w, const void* x_row, const int32_t* ids,
                        const float* weights, float* out_row);
void moe_token_fp32(const MoeWeights& w, const void* x_row, const int32_t* ids,
                    const float* weights, float* out_row);
void moe_token_truth(const MoeWeights& w, const void* x_row, const int32_t* ids,
                     const float* weights, double* out_row);

float silu_reference(float x); // x / (1 + e^-x)
float round_to_bf16(float value);

} // namespace specjit::reference
