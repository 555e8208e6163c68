// The CPU reference of inv_rope_fp8_quant checked against the contract by independent means:
// e4m3 rounding against a brute-force nearest search over every code, the scale formula against
// its definition, and the output layout against hand-built inputs.
#include "reference/inv_rope_reference.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>

using namespace specjit::reference;

namespace {

// The e4m3 code nearest to v among every finite code, ties to the even code (even mantissa);
// beyond 448, 448. Independent of float_to_e4m3's arithmetic.
uint8_t brute_force_e4m3(float v) {
  if (std::isnan(v))
    return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double magnitude = std::fabs(static_cast<double>(v));
  int best = 0;
  double best_distance = INFINITY;
  for (int code = 0; code <= 0x7e; ++code) {
    const double distance = std::fabs(static_cast<double>(e4m3_to_float(code)) - magnitude);
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0 && (best & 1))) {
      best = code;
      best_distance = distance;
    }
  }
  return sign | static_cast<uint8_t>(best);
}

} // namespace

TEST_CASE("e4m3 encodes the contract's landmark values") {
  CHECK(float_to_e4m3(448.0f) == 0x7e);
  CHECK(float_to_e4m3(-448.0f) == 0xfe);
  CHECK(float_to_e4m3(460.0f) == 0x7e); // rounds to 448
  CHECK(float_to_e4m3(1e30f) == 0x7e);  // saturates, no infinity in e4m3fn
  CHECK(float_to_e4m3(-INFINITY) == 0xfe);
  CHECK(float_to_e4m3(NAN) == 0x7f);
  CHECK(float_to_e4m3(1.0f) == 0x38);
  CHECK(float_to_e4m3(0.5f) == 0x30);
  CHECK(float_to_e4m3(0.0f) == 0x00);
  CHECK(float_to_e4m3(-0.0f) == 0x80);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -9)) == 0x01);   // smallest subnormal
  CHECK(float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);  // tie with 0: to even
  CHECK(float_to_e4m3(std::ldexp(3.0f, -10)) == 0x02);  // tie 1 vs 2 steps: to even
  CHECK(float_to_e4m3(-std::ldexp(1.0f, -11)) == 0x80); // underflows to -0
  CHECK(float_to_e4m3(1.0625f) == 0x38);                // tie between 1 and 1.125: mantissa 0
  CHECK(float_to_e4m3(1.1875f) == 0x3a);                // tie between 1.125 and 1.25: mantissa 2
  CHECK(float_to_e4m3(std::ldexp(1.0f, -6)) == 0x08);   // smallest normal
  CHECK(float_to_e4m3(1e-40f) == 0x00);                 // fp32 subnormal inputs
  CHECK(float_to_e4m3(-1e-40f) == 0x80);
  CHECK(float_to_e4m3(std::ldexp(15.0f, -3)) == 0x3f); // 1.875: largest mantissa, exponent 0
  CHECK(float_to_e4m3(std::ldexp(31.0f, -4)) == 0x40); // 1.9375 ties up to 2 (even)
}

TEST_CASE("e4m3 decoding and encoding round-trip every finite code") {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) {
      CHECK(std::isnan(e4m3_to_float(static_cast<uint8_t>(code))));
      continue;
    }
    INFO("code " << code);
    CHECK(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(code))) == code);
  }
  CHECK(e4m3_to_float(0x7e) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
}

TEST_CASE("e4m3 rounding matches a brute-force nearest-even search") {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-14, 10);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(mantissa(rng), exponent(rng));
    INFO("v = " << v);
    REQUIRE(float_to_e4m3(v) == brute_force_e4m3(v));
  }
  // Every midpoint between neighbouring codes, where ties to even decide.
  for (int code = 0; code < 0x7e; ++code) {
    const float mid = (e4m3_to_float(code) + e4m3_to_float(code + 1)) / 2;
    INFO("midpoint after code " << code);
    CHECK(float_to_e4m3(mid) == brute_force_e4m3(mid));
    CHECK(float_to_e4m3(-mid) == brute_force_e4m3(-mid));
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and widens exactly") {
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc000) == -2.0f);
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80); // tie: to even
  CHECK(float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82); // tie: to even
  CHECK(float_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
}

TEST_CASE("the scale exponent is ceil(log2 r), exact for powers of two and subnormals") {
  CHECK(ceil_log2_positive(1.0f) == 0);
  CHECK(ceil_log2_positive(std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ceil_log2_positive(std::nextafter(1.0f, 0.0f)) == 0);
  CHECK(ceil_log2_positive(0.75f) == 0);
  CHECK(ceil_log2_positive(0.5f) == -1);
  CHECK(ceil_log2_positive(std::ldexp(1.0f, -149)) == -149); // smallest subnormal
  CHECK(ceil_log2_positive(std::ldexp(3.0f, -149)) == -147);
  CHECK(ceil_log2_positive(std::ldexp(1.0f, -130)) == -130); // subnormal power of two
  CHECK(ceil_log2_positive(std::ldexp(1.5f, -127)) == -126); // subnormal, rounds up to normal
  for (int k = -149; k <= 127; ++k) {
    CHECK(exp2_int(k) == std::ldexp(1.0f, k));
    CHECK(ceil_log2_positive(exp2_int(k)) == k);
  }
  CHECK(exp2_int(-150) == 0.0f);
  CHECK(std::isinf(exp2_int(128)));
}

TEST_CASE("block scales are the smallest power of two that maps amax into +-448") {
  CHECK(e4m3_block_scale(448.0f).scale == 1.0f);
  CHECK(e4m3_block_scale(448.0f).inverse == 1.0f);
  CHECK(e4m3_block_scale(449.0f).scale == 2.0f);
  CHECK(e4m3_block_scale(224.0f).scale == 0.5f);
  CHECK(e4m3_block_scale(896.0f).scale == 2.0f);
  // The floor: amax 0 and amax 1e-10 give the same scale, 2^ceil(log2(1e-10 / 448)) = 2^-42.
  CHECK(e4m3_block_scale(0.0f).scale == std::ldexp(1.0f, -42));
  CHECK(e4m3_block_scale(1e-10f).scale == std::ldexp(1.0f, -42));
  CHECK(e4m3_block_scale(1e-10f).inverse == std::ldexp(1.0f, 42));
  CHECK(e4m3_block_scale(3.0e38f).scale == std::ldexp(1.0f, 120));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 120);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::ldexp(mantissa(rng), exponent(rng));
    const BlockScale s = e4m3_block_scale(amax);
    const double r = static_cast<double>(std::fmax(amax, 1e-10f) / 448.0f);
    INFO("amax = " << amax);
    REQUIRE(static_cast<double>(s.scale) >= r);
    REQUIRE(static_cast<double>(s.scale) / 2 < r);
    REQUIRE(s.scale * s.inverse == 1.0f);
  }
}

TEST_CASE("the inverse rotation is the pinned inverse GPT-J formula") {
  float y0 = 0, y1 = 0;
  inverse_rotate(1.0f, 2.0f, 0.5f, 0.25f, y0, y1);
  CHECK(y0 == 1.0f * 0.5f + 2.0f * 0.25f);
  CHECK(y1 == 2.0f * 0.5f - 1.0f * 0.25f);
  // Rotating by +theta then inverting restores the pair (up to rounding).
  const float theta = 0.3f, c = std::cos(theta), s = std::sin(theta);
  const float x0 = 0.7f, x1 = -1.3f;
  inverse_rotate(x0 * c - x1 * s, x1 * c + x0 * s, c, s, y0, y1);
  CHECK(y0 == doctest::Approx(x0).epsilon(1e-6));
  CHECK(y1 == doctest::Approx(x1).epsilon(1e-6));
  // The products are rounded before the fused add: fma(x0, c, round(x1*s)).
  const float a = 1.0f + std::ldexp(1.0f, -23), b = 1.0f - std::ldexp(1.0f, -23);
  inverse_rotate(a, a, 1.0f, b, y0, y1);
  CHECK(y0 == std::fma(a, 1.0f, a * b));
  CHECK(y1 == std::fma(a, 1.0f, -(a * b)));
}

TEST_CASE("the reference lays out fp8 as [G, T, hpg*512] and scales as [G, hpg*4, Ta]") {
  const int64_t groups = 2, heads_per_group = 3, tokens = 5, max_pos = 4;
  const int64_t heads = groups * heads_per_group;
  // Head h of token t holds the constant (t + 1) * 2^h / 64 before rotation: every block of it
  // has its own amax. cos = 1, sin = 0 leave the values unrotated.
  std::vector<uint16_t> o(tokens * heads * k_head_dim);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < k_head_dim; ++d)
        o[(t * heads + h) * k_head_dim + d] =
            float_to_bf16(static_cast<float>(t + 1) * std::ldexp(1.0f, static_cast<int>(h) - 6));
  std::vector<float> cos_sin(max_pos * 64, 0.0f);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < 32; ++i)
      cos_sin[p * 64 + i] = 1.0f;
  const std::vector<int64_t> positions = {3, 0, 2, 1, 3};
  const InvRopeFp8QuantOutput out =
      inv_rope_fp8_quant(o, positions, cos_sin, groups, heads_per_group);
  const int64_t ta = aligned_tokens(tokens);
  REQUIRE(ta == 8);
  REQUIRE(out.fp8.size() == static_cast<size_t>(groups * tokens * heads_per_group * 512));
  REQUIRE(out.scales.size() == static_cast<size_t>(groups * heads_per_group * 4 * ta));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < heads_per_group; ++j)
      for (int64_t b = 0; b < 4; ++b) {
        const int64_t column = g * heads_per_group * 4 + j * 4 + b;
        for (int64_t t = 0; t < ta; ++t) {
          const float scale = out.scales[column * ta + t];
          if (t >= tokens) {
            CHECK(scale == 0.0f);
            continue;
          }
          const int64_t h = g * heads_per_group + j;
          const float value = static_cast<float>(t + 1) * std::ldexp(1.0f, static_cast<int>(h) - 6);
          CHECK(scale == e4m3_block_scale(value).scale);
          for (int64_t e = 0; e < 128; ++e) {
            const uint8_t q = out.fp8[((g * tokens + t) * heads_per_group + j) * 512 + b * 128 + e];
            REQUIRE(e4m3_to_float(q) * scale == doctest::Approx(value).epsilon(1.0 / 16));
          }
        }
      }
}

TEST_CASE("the reference rotates exactly dims 448..511, pairwise and interleaved") {
  const int64_t tokens = 1;
  std::vector<uint16_t> o(k_head_dim);
  for (int64_t d = 0; d < k_head_dim; ++d)
    o[d] = float_to_bf16(d < 448 ? 1.0f : (d % 2 == 0 ? 1.0f : 0.0f));
  // cos 0, sin 1: (x0, x1) -> (x1, -x0), so (1, 0) -> (0, -1).
  std::vector<float> cos_sin(64, 0.0f);
  for (int64_t i = 0; i < 32; ++i)
    cos_sin[32 + i] = 1.0f;
  const InvRopeFp8QuantOutput out =
      inv_rope_fp8_quant(o, std::vector<int64_t>(tokens, 0), cos_sin, 1, 1);
  const float scale = out.scales[3 * 4]; // block 3 of the only head, Ta = 4
  CHECK(scale == e4m3_block_scale(1.0f).scale);
  for (int64_t d = 0; d < k_head_dim; ++d) {
    const float expected = d < 448 ? 1.0f : (d % 2 == 0 ? 0.0f : -1.0f);
    const float block_scale = out.scales[(d / 128) * 4];
    INFO("d = " << d);
    CHECK(e4m3_to_float(out.fp8[d]) * block_scale == expected);
  }
}
