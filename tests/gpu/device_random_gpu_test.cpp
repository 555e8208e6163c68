// The benchmarks' device data (tools/bench/device_random.h) on a device: seeded (the same seed
// gives the same bytes, another seed others), normal with the asked deviation, e4m3 codes
// spread and never NaN, bf16 the rounded f32 values, integers uniform in their range.
#include "device_random.h"

#include "engine_fixture.h"
#include "gpu/gpu_test_support.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

using namespace specjit;
using specjit::test::DeviceBuffer;

namespace {

constexpr uint64_t k_count = 1 << 20;

template <typename T> std::vector<T> download(const DeviceBuffer& buffer, uint64_t count) {
  std::vector<T> host(count);
  test::require_ok(test::drv().check(
      test::drv().cuMemcpyDtoH(host.data(), buffer.ptr(), count * sizeof(T)), "cuMemcpyDtoH"));
  return host;
}

} // namespace

TEST_CASE("gpu: device random data is seeded, normal, spread and in range") {
  if (!test::gpu_or_skip("device random data"))
    return;
  test::TempDir dir;
  runtime::Engine context(test::config_in(dir, {{"SPECJIT_ARCH", ""}}));
  test::require_ok(context.make_context_current());
  bench::DeviceRandom random(
      bench::device_random_config(test::config_in(dir, {{"SPECJIT_ARCH", ""}}), dir / "data"));

  DeviceBuffer f32(k_count * 4), again(k_count * 4), other(k_count * 4);
  random.normal(f32.ptr(), bench::RandomFormat::f32, k_count, 7, 2.0f, 1.0f, nullptr);
  random.normal(again.ptr(), bench::RandomFormat::f32, k_count, 7, 2.0f, 1.0f, nullptr);
  random.normal(other.ptr(), bench::RandomFormat::f32, k_count, 8, 2.0f, 1.0f, nullptr);
  test::require_ok(test::drv().check(test::drv().cuCtxSynchronize(), "cuCtxSynchronize"));
  const std::vector<float> values = download<float>(f32, k_count);
  CHECK(values == download<float>(again, k_count));
  CHECK(values != download<float>(other, k_count));
  double sum = 0, squares = 0;
  for (float v : values) {
    sum += v;
    squares += double(v) * v;
  }
  const double mean = sum / k_count, deviation = std::sqrt(squares / k_count - mean * mean);
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(deviation - 2.0) < 0.02);

  DeviceBuffer bf16(k_count * 2);
  random.normal(bf16.ptr(), bench::RandomFormat::bf16, k_count, 7, 2.0f, 1.0f, nullptr);
  const std::vector<uint16_t> halves = download<uint16_t>(bf16, k_count);
  for (uint64_t i = 0; i < k_count; i += 997) {
    uint32_t bits = uint32_t(halves[i]) << 16;
    float rounded;
    std::memcpy(&rounded, &bits, 4);
    CHECK(std::abs(rounded - values[i]) <= std::abs(values[i]) * 0x1p-8f);
  }

  DeviceBuffer e4m3(k_count);
  random.normal(e4m3.ptr(), bench::RandomFormat::e4m3, k_count, 9, 1.0f, 5.0f / 448, nullptr);
  const std::vector<uint8_t> codes = download<uint8_t>(e4m3, k_count);
  std::set<uint8_t> distinct(codes.begin(), codes.end());
  CHECK(distinct.size() > 200);
  CHECK(distinct.count(0x7f) == 0); // NaN
  CHECK(distinct.count(0xff) == 0);
  int64_t saturated = 0;
  for (uint8_t c : codes)
    saturated += (c & 0x7f) == 0x7e;
  CHECK(saturated < 20); // beyond 5 sigma: about one value in 1.7 million

  DeviceBuffer positions(k_count * 8);
  random.uniform_below(positions.ptr(), k_count, 10, 8192, nullptr);
  const std::vector<int64_t> ints = download<int64_t>(positions, k_count);
  double int_sum = 0;
  bool in_range = true;
  for (int64_t v : ints) {
    in_range = in_range && v >= 0 && v < 8192;
    int_sum += double(v);
  }
  CHECK(in_range);
  CHECK(std::abs(int_sum / k_count - 4095.5) < 40);
}
