// Random inputs for the kernel benchmarks, on the host: normal values, as a real layer's
// activations and weights are, quantized like one (e4m3 with one scale per group of values, the
// group being a tensor or an expert), or rounded to bf16. Constant data would time the kernels
// on inputs that toggle no bits: the peer runs 4-16 % faster on it at compute-bound points.
#pragma once

#include <cstdint>
#include <vector>

namespace specjit::bench {

struct RandomTensor {
  std::vector<uint8_t> bytes; // e4m3 codes, or bf16 bits (two bytes a value, little-endian)
  std::vector<float> scales;  // one a group: amax / 448 (e4m3), 1 (bf16)
};

// groups * per_group values N(0, sigma^2) from `seed`, group-major. The same seed gives the same
// bytes on any machine and any number of threads (each value comes from its own index).
RandomTensor random_tensor(int64_t groups, int64_t per_group, bool fp8, float sigma, uint64_t seed);

// The standard normal value number `index` of `seed` (what random_tensor draws).
float random_normal(uint64_t seed, uint64_t index);

} // namespace specjit::bench
