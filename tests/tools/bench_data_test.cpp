// The benchmarks' random inputs and peer ratios (tools/bench/bench_data.h, moe_models.h), and the
// report writer's layout (bench_common.h's write_json), without a GPU.
#include "bench_data.h"
#include "moe_models.h"

#include "reference/inv_rope_reference.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace specjit::bench;

TEST_CASE("random e4m3 data is the same for a seed, differs between seeds and is not constant") {
  const RandomTensor a = random_tensor(4, 4096, true, 0.05f, 7);
  const RandomTensor b = random_tensor(4, 4096, true, 0.05f, 7);
  const RandomTensor c = random_tensor(4, 4096, true, 0.05f, 8);
  CHECK(a.bytes == b.bytes);
  CHECK(a.scales == b.scales);
  CHECK(a.bytes != c.bytes);
  CHECK(std::set<uint8_t>(a.bytes.begin(), a.bytes.end()).size() > 100);
}

TEST_CASE("each group's e4m3 scale maps its largest value to 448, and values look normal") {
  const float sigma = 0.05f;
  const RandomTensor t = random_tensor(3, 8192, true, sigma, 1);
  REQUIRE(t.scales.size() == 3);
  for (int64_t g = 0; g < 3; ++g) {
    // N(0, sigma^2) over 8192 draws: the largest |value| lies near 3.5-4.5 sigma.
    CHECK(t.scales[g] * 448 > 3.0f * sigma);
    CHECK(t.scales[g] * 448 < 5.5f * sigma);
    double sum = 0, squares = 0;
    float amax = 0;
    for (int64_t i = 0; i < 8192; ++i) {
      const float v = specjit::reference::e4m3_to_float(t.bytes[g * 8192 + i]) * t.scales[g];
      sum += v;
      squares += double(v) * v;
      amax = std::max(amax, std::fabs(v));
    }
    CHECK(std::fabs(sum / 8192) < 0.1 * sigma);
    CHECK(std::sqrt(squares / 8192) == doctest::Approx(sigma).epsilon(0.1));
    CHECK(amax == doctest::Approx(t.scales[g] * 448).epsilon(0.07));
  }
}

TEST_CASE("random bf16 data has the requested spread and scales of one") {
  const RandomTensor t = random_tensor(1, 10000, false, 2.0f, 3);
  REQUIRE(t.bytes.size() == 20000);
  CHECK(t.scales == std::vector<float>{1.0f});
  double squares = 0;
  for (size_t i = 0; i < 10000; ++i) {
    const uint16_t bits = static_cast<uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8));
    const float v = specjit::reference::bf16_to_float(bits);
    squares += double(v) * v;
  }
  CHECK(std::sqrt(squares / 10000) == doctest::Approx(2.0).epsilon(0.05));
}

TEST_CASE("the peer ratio pairs the fixed routing with fixed, the mean with mean") {
  const Model& mixtral = k_models[1];
  REQUIRE(std::string(mixtral.name) == "mixtral-8x7b");
  // T = 4: the fixed routing's peer time (291.1) over the fixed time, the 20-routing mean
  // (225.9) over the mean.
  const PeerRatios r = peer_ratios(mixtral.peer, 1, 291.1, 225.9);
  REQUIRE(r.fixed);
  REQUIRE(r.mean);
  CHECK(*r.fixed == doctest::Approx(1.0));
  CHECK(*r.mean == doctest::Approx(1.0));
  CHECK_FALSE(peer_ratios(mixtral.peer, 1, 291.1, std::nullopt).mean);
  // The scaled shapes have no peer figures: no ratio.
  const PeerRatios none = peer_ratios(k_models[3].peer, 0, 10.0, 10.0);
  CHECK_FALSE(none.fixed);
  CHECK_FALSE(none.mean);
}
