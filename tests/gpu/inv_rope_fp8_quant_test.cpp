// inv_rope_fp8_quant on the GPU: fp8 bytes and scales bit-identical to the CPU reference
// (tests/reference/inv_rope_reference.h) for many token counts and both head layouts, outputs
// poisoned before every run, padding scale rows zero, one compiled variant for every T, and the
// checked mode's position validation.
#include "engine_fixture.h"
#include "gpu/gpu_test_support.h"
#include "reference/inv_rope_reference.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"
#include "runtime/driver.h"
#include "runtime/engine.h"

#include "support/error.h"

#include <cmath>
#include <cstring>
#include <sstream>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;
using specjit::test::DeviceBuffer;
using specjit::test::drv;
using specjit::test::k_poison;
using specjit::test::require_ok;

namespace {

constexpr int64_t k_max_pos = 8192;
const int64_t k_token_counts[] = {1, 2, 3, 4, 5, 16, 17, 62, 255, 1000, 4096};

// splitmix64: fast enough for hundreds of millions of inputs, and reproducible.
class Rng {
public:
  explicit Rng(uint64_t seed) : m_state(seed) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; } // [0, 1)

private:
  uint64_t m_state;
};

// The real RoPE table: cos/sin of pos * 10000^(-i/32).
std::vector<float> make_cos_sin_cache() {
  std::vector<float> cache(k_max_pos * 64);
  for (int64_t p = 0; p < k_max_pos; ++p)
    for (int64_t i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(p) * std::pow(10000.0, -static_cast<double>(i) / 32);
      cache[p * 64 + i] = static_cast<float>(std::cos(angle));
      cache[p * 64 + 32 + i] = static_cast<float>(std::sin(angle));
    }
  return cache;
}

// Random non-zero bf16 inputs, [-4, 4) in most blocks; some 128-element blocks are scaled tiny
// (the 1e-10 amax floor, bf16 subnormals), some huge (scales near 2^120), and some hold a value
// of exactly 7 * 2^m (amax / 448 an exact power of two: the code 0x7e, no rounding up).
std::vector<uint16_t> make_inputs(int64_t elements, Rng& rng) {
  std::vector<uint16_t> o(static_cast<size_t>(elements));
  for (int64_t block = 0; block < elements / 128; ++block) {
    const uint64_t kind = rng.next() % 16;
    float factor = 1.0f;
    if (kind == 0)
      factor = 1e-20f;
    else if (kind == 1)
      factor = 1e-39f; // bf16 subnormals
    else if (kind == 2)
      factor = 1e36f;
    else if (kind == 3)
      factor = 1e-8f; // amax just around the floor after scaling
    for (int64_t e = 0; e < 128; ++e) {
      float value = (rng.uniform() * 8.0f - 4.0f) * factor;
      uint16_t bits = reference::float_to_bf16(value);
      if ((bits & 0x7fff) == 0)
        bits = static_cast<uint16_t>((bits & 0x8000) | 0x0001); // non-zero, even if subnormal
      o[block * 128 + e] = bits;
    }
    if (kind == 4)
      o[block * 128 + rng.next() % 128] = reference::float_to_bf16(-7.0f * std::ldexp(1.0f, 3));
  }
  return o;
}

std::string describe_fp8_index(size_t index, int64_t tokens, int64_t heads_per_group) {
  const int64_t row_width = heads_per_group * 512;
  const int64_t g = static_cast<int64_t>(index) / (tokens * row_width);
  const int64_t t = static_cast<int64_t>(index) / row_width % tokens;
  const int64_t j = static_cast<int64_t>(index) % row_width / 512;
  const int64_t d = static_cast<int64_t>(index) % 512;
  std::ostringstream text;
  text << "out_fp8[" << index << "] (g " << g << ", t " << t << ", head " << j << ", dim " << d
       << ", block " << d / 128 << ")";
  return text.str();
}

struct Layout {
  int64_t groups;
  int64_t heads_per_group;
};

// Runs one token count on the device and compares every byte with the reference.
void run_and_compare(Engine& engine, const Layout& layout, int64_t tokens,
                     const DeviceBuffer& cos_sin_device, const std::vector<float>& cos_sin,
                     Rng& rng) {
  const int64_t heads = layout.groups * layout.heads_per_group;
  const int64_t ta = reference::aligned_tokens(tokens);
  INFO("layout G=" << layout.groups << " x " << layout.heads_per_group << ", T=" << tokens);

  const std::vector<uint16_t> o = make_inputs(tokens * heads * 512, rng);
  std::vector<int64_t> positions(static_cast<size_t>(tokens));
  for (int64_t& p : positions)
    p = static_cast<int64_t>(rng.next() % k_max_pos);
  const reference::InvRopeFp8QuantOutput expected =
      reference::inv_rope_fp8_quant(o, positions, cos_sin, layout.groups, layout.heads_per_group);

  DeviceBuffer o_device(o.size() * sizeof(uint16_t));
  DeviceBuffer positions_device(positions.size() * sizeof(int64_t));
  DeviceBuffer fp8_device(expected.fp8.size());
  DeviceBuffer scales_device(expected.scales.size() * sizeof(float));
  o_device.upload(o.data());
  positions_device.upload(positions.data());
  fp8_device.poison();
  scales_device.poison();

  ops::InvRopeFp8QuantOptions options;
  options.num_groups = layout.groups;
  options.heads_per_group = layout.heads_per_group;
  const TensorRef o_ref{o_device.ptr(), DType::bf16, {tokens, heads, 512}, {}};
  const TensorRef positions_ref{positions_device.ptr(), DType::i64, {tokens}, {}};
  const TensorRef cos_sin_ref{cos_sin_device.ptr(), DType::f32, {k_max_pos, 64}, {}};
  const TensorRef fp8_ref{
      fp8_device.ptr(), DType::e4m3, {layout.groups, tokens, layout.heads_per_group * 512}, {}};
  const TensorRef scales_ref{
      scales_device.ptr(), DType::f32, {layout.groups, layout.heads_per_group * 4, ta}, {}};
  require_ok(ops::inv_rope_fp8_quant(engine, o_ref, positions_ref, cos_sin_ref, fp8_ref, scales_ref,
                                     options, nullptr));
  require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));

  std::vector<uint8_t> fp8(expected.fp8.size());
  std::vector<float> scales(expected.scales.size());
  fp8_device.download(fp8.data());
  scales_device.download(scales.data());

  size_t fp8_mismatches = 0, first = 0;
  for (size_t i = 0; i < fp8.size(); ++i)
    if (fp8[i] != expected.fp8[i] && fp8_mismatches++ == 0)
      first = i;
  if (fp8_mismatches != 0) {
    const int64_t row_width = layout.heads_per_group * 512;
    const int64_t g = static_cast<int64_t>(first) / (tokens * row_width);
    const int64_t t = static_cast<int64_t>(first) / row_width % tokens;
    const int64_t j = static_cast<int64_t>(first) % row_width / 512;
    const int64_t d = static_cast<int64_t>(first) % 512;
    const float input =
        reference::bf16_to_float(o[((t * heads) + g * layout.heads_per_group + j) * 512 + d]);
    const float scale = expected.scales[((g * layout.heads_per_group + j) * 4 + d / 128) * ta + t];
    FAIL_CHECK(fp8_mismatches << " fp8 bytes differ; first: "
                              << describe_fp8_index(first, tokens, layout.heads_per_group)
                              << " got 0x" << std::hex << int{fp8[first]} << " expected 0x"
                              << int{expected.fp8[first]} << std::dec << " (input " << input
                              << ", position " << positions[t] << ", reference scale " << scale
                              << ", got " << reference::e4m3_to_float(fp8[first]) << " expected "
                              << reference::e4m3_to_float(expected.fp8[first]) << " in units)");
  }

  size_t scale_mismatches = 0;
  for (size_t i = 0; i < scales.size(); ++i) {
    uint32_t got, want;
    std::memcpy(&got, &scales[i], 4);
    std::memcpy(&want, &expected.scales[i], 4);
    if (got == want)
      continue;
    if (scale_mismatches++ == 0) {
      const int64_t column = static_cast<int64_t>(i) / ta;
      const int64_t t = static_cast<int64_t>(i) % ta;
      FAIL_CHECK("out_scales[" << i << "] (column " << column << " = group "
                               << column / (layout.heads_per_group * 4) << " head "
                               << column % (layout.heads_per_group * 4) / 4 << " block "
                               << column % 4 << ", row " << t
                               << (t >= tokens ? ", a padding row" : "") << ") got " << scales[i]
                               << " (0x" << std::hex << got << ") expected " << expected.scales[i]
                               << " (0x" << want << ")" << std::dec);
    }
  }
  CHECK_MESSAGE(scale_mismatches == 0, scale_mismatches << " scales differ");
}

void run_layout(const Layout& layout) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  require_ok(engine.make_context_current());
  const std::vector<float> cos_sin = make_cos_sin_cache();
  DeviceBuffer cos_sin_device(cos_sin.size() * sizeof(float));
  cos_sin_device.upload(cos_sin.data());
  Rng rng(0x5eed + static_cast<uint64_t>(layout.groups * 1000 + layout.heads_per_group));
  for (int64_t tokens : k_token_counts)
    run_and_compare(engine, layout, tokens, cos_sin_device, cos_sin, rng);
}

} // namespace

TEST_CASE("inv_rope_fp8_quant matches the reference bit for bit with 8 groups of 16 heads") {
  if (!specjit::test::gpu_or_skip("inv_rope_fp8_quant 8x16 bit-exact"))
    return;
  run_layout({8, 16});
}

TEST_CASE("inv_rope_fp8_quant matches the reference bit for bit with a single head") {
  if (!specjit::test::gpu_or_skip("inv_rope_fp8_quant 1x1 bit-exact"))
    return;
  run_layout({1, 1});
}

TEST_CASE("one compiled inv_rope_fp8_quant variant per head layout serves every token count") {
  if (!specjit::test::gpu_or_skip("inv_rope_fp8_quant one variant"))
    return;
  TempDir dir;
  Engine engine(test::config_in(dir));
  require_ok(engine.make_context_current());
  const std::vector<float> cos_sin = make_cos_sin_cache();
  DeviceBuffer cos_sin_device(cos_sin.size() * sizeof(float));
  cos_sin_device.upload(cos_sin.data());
  Rng rng(99);
  uint64_t compiles_before = engine.stats().compiles;
  for (const Layout& layout : {Layout{8, 16}, Layout{1, 1}}) {
    for (int64_t tokens : {1, 2, 3, 5, 17, 62, 255, 1000})
      run_and_compare(engine, layout, tokens, cos_sin_device, cos_sin, rng);
    const EngineStats stats = engine.stats();
    CHECK_MESSAGE(stats.compiles - compiles_before == 1,
                  "layout " << layout.groups << "x" << layout.heads_per_group << " compiled "
                            << stats.compiles - compiles_before << " variants");
    compiles_before = stats.compiles;
  }
  CHECK(engine.stats().failures == 0);
}

TEST_CASE("checked inv_rope_fp8_quant rejects the first position outside the cos/sin table") {
  if (!specjit::test::gpu_or_skip("inv_rope_fp8_quant checked positions"))
    return;
  TempDir dir;
  Engine engine(test::config_in(dir));
  require_ok(engine.make_context_current());
  const int64_t tokens = 6, max_pos = 16;
  std::vector<float> cos_sin(max_pos * 64, 0.5f);
  std::vector<int64_t> positions = {0, 15, 3, 16, -1, 2};
  DeviceBuffer cos_sin_device(cos_sin.size() * sizeof(float));
  DeviceBuffer positions_device(positions.size() * sizeof(int64_t));
  DeviceBuffer o_device(tokens * 512 * 2);
  DeviceBuffer fp8_device(tokens * 512);
  DeviceBuffer scales_device(4 * 8 * sizeof(float));
  cos_sin_device.upload(cos_sin.data());
  positions_device.upload(positions.data());
  ops::InvRopeFp8QuantOptions options;
  options.checked = true;
  auto launch = [&] {
    return summarize(ops::inv_rope_fp8_quant(
        engine, {o_device.ptr(), DType::bf16, {tokens, 1, 512}, {}},
        {positions_device.ptr(), DType::i64, {tokens}, {}},
        {cos_sin_device.ptr(), DType::f32, {max_pos, 64}, {}},
        {fp8_device.ptr(), DType::e4m3, {1, tokens, 512}, {}},
        {scales_device.ptr(), DType::f32, {1, 4, 8}, {}}, options, nullptr));
  };
  ErrorSummary error = launch();
  CHECK(error.code == Errc::invalid_argument);
  CHECK_MESSAGE(error.message.find("positions[3] = 16 is outside [0, 16)") != std::string::npos,
                error.message);
  positions[3] = 4;
  positions[4] = 1;
  positions_device.upload(positions.data());
  error = launch();
  CHECK_MESSAGE(error.message.empty(), error.message);
}
