// Random inputs for the kernel benchmarks (bench_data.h).
#include "bench_data.h"

#include "reference/inv_rope_reference.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace specjit::bench {

namespace {

uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Runs body(begin, end) over [0, count) on all cores.
template <class Body> void parallel(int64_t count, Body body) {
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < threads; ++w)
    pool.emplace_back([=] { body(count * w / threads, count * (w + 1) / threads); });
  for (std::thread& t : pool)
    t.join();
}

} // namespace

float random_normal(uint64_t seed, uint64_t index) {
  // Box-Muller on the two halves of one draw: u1 in (0, 1], u2 in [0, 1).
  const uint64_t r = splitmix(splitmix(seed) ^ index);
  const double u1 = (static_cast<double>(r >> 32) + 1.0) * 0x1.0p-32;
  const double u2 = static_cast<double>(r & 0xffffffffu) * 0x1.0p-32;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

RandomTensor random_tensor(int64_t groups, int64_t per_group, bool fp8, float sigma,
                           uint64_t seed) {
  RandomTensor t;
  t.bytes.resize(static_cast<size_t>(groups * per_group) * (fp8 ? 1 : 2));
  t.scales.assign(groups, 1.0f);
  if (fp8) {
    parallel(groups, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const uint64_t first = static_cast<uint64_t>(g * per_group);
        float amax = 0;
        for (int64_t i = 0; i < per_group; ++i)
          amax = std::max(amax, std::fabs(sigma * random_normal(seed, first + i)));
        t.scales[g] = std::max(amax, 1e-12f) / reference::k_e4m3_max;
      }
    });
  }
  parallel(groups * per_group, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = sigma * random_normal(seed, static_cast<uint64_t>(i));
      if (fp8) {
        t.bytes[i] = reference::float_to_e4m3(v / t.scales[i / per_group]);
      } else {
        const uint16_t bits = reference::float_to_bf16(v);
        t.bytes[2 * i] = static_cast<uint8_t>(bits & 0xff);
        t.bytes[2 * i + 1] = static_cast<uint8_t>(bits >> 8);
      }
    }
  });
  return t;
}

} // namespace specjit::bench
