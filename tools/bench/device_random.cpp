#include "device_random.h"

#include "bench_common.h"

#include <algorithm>

namespace specjit::bench {

namespace {

#define SPECJIT_TEXT(...) #__VA_ARGS__
#define SPECJIT_EXPANDED_TEXT(...) SPECJIT_TEXT(__VA_ARGS__)

constexpr const char* k_args_header = SPECJIT_EXPANDED_TEXT(SPECJIT_DEVICE_RANDOM_ARGS);

// One thread a value, grid-stride; the value depends on (seed, index) only.
constexpr const char* k_source = R"cuda(#include "device_random_args.h"

__device__ __forceinline__ unsigned long long mix(unsigned long long z) { // splitmix64
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Box-Muller on the hash's two 24-bit halves: u1 in (0, 1], u2 in [0, 1).
__device__ __forceinline__ float standard_normal(unsigned long long bits) {
  const float u1 = static_cast<float>((bits >> 40) + 1) * 0x1p-24f;
  const float u2 = static_cast<float>(bits & 0xffffffull) * 0x1p-24f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <int FORMAT>
__global__ void device_random(DeviceRandomArgs a) {
  const unsigned long long key = mix(a.seed);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) +
                              threadIdx.x;
       i < a.count; i += stride) {
    const unsigned long long bits = mix(key + i);
    if constexpr (FORMAT == 3) {
      reinterpret_cast<long long*>(a.out)[i] =
          static_cast<long long>(bits % static_cast<unsigned long long>(a.range));
    } else {
      const float v = standard_normal(bits) * a.sigma;
      if constexpr (FORMAT == 2) {
        reinterpret_cast<float*>(a.out)[i] = v;
      } else if constexpr (FORMAT == 1) { // bf16, round to nearest even
        const unsigned u = __float_as_uint(v);
        reinterpret_cast<unsigned short*>(a.out)[i] =
            static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      } else { // e4m3, round to nearest even, saturating
        unsigned short pair;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
            : "=h"(pair)
            : "f"(0.0f), "f"(v * a.inverse_scale));
        reinterpret_cast<unsigned char*>(a.out)[i] = static_cast<unsigned char>(pair & 0xffu);
      }
    }
  }
}
)cuda";

constexpr unsigned k_block = 256;

} // namespace

runtime::KernelDef device_random_kernel() {
  runtime::KernelDef def;
  def.id = "bench_device_random";
  def.source = runtime::KernelSource::from_text("device_random.cu", k_source);
  def.headers = {{"device_random_args.h", k_args_header}};
  def.function = "device_random";
  def.params = {runtime::ParamDef::user("format", runtime::Policy::exact())};
  return def;
}

std::vector<runtime::VariantRequest> device_random_variants() {
  std::vector<runtime::VariantRequest> requests;
  for (RandomFormat format :
       {RandomFormat::e4m3, RandomFormat::bf16, RandomFormat::f32, RandomFormat::i64_below})
    requests.push_back({device_random_kernel(), {static_cast<int64_t>(format)}});
  return requests;
}

Config device_random_config(Config base, const std::string& cache_dir) {
  base.cache_dir.set(cache_dir, SettingSource::cli_flag);
  base.readonly_dirs.set({}, SettingSource::cli_flag);
  base.log.set("off", SettingSource::cli_flag);
  base.remote.set(std::nullopt, SettingSource::cli_flag);
  base.strict.set(StrictMode::off, SettingSource::cli_flag);
  return base;
}

DeviceRandom::DeviceRandom(const Config& config)
    : m_engine(config), m_kernel(must(m_engine.add_kernel(device_random_kernel()), "kernel")) {}

void DeviceRandom::normal(CUdeviceptr out, RandomFormat format, uint64_t count, uint64_t seed,
                          float sigma, float scale, CUstream stream) {
  fill(format, DeviceRandomArgs{out, count, seed, sigma, 1.0f / scale, 1}, stream);
}

void DeviceRandom::uniform_below(CUdeviceptr out, uint64_t count, uint64_t seed, int64_t range,
                                 CUstream stream) {
  fill(RandomFormat::i64_below, DeviceRandomArgs{out, count, seed, 1.0f, 1.0f, range}, stream);
}

void DeviceRandom::fill(RandomFormat format, const DeviceRandomArgs& args, CUstream stream) {
  const runtime::Variant* variant =
      must(m_engine.get(m_kernel, {static_cast<int64_t>(format)}), "device random kernel");
  // Enough blocks to fill the device; the grid-stride loop covers the rest.
  const uint64_t blocks = std::clamp<uint64_t>((args.count + k_block - 1) / k_block, 1, 65536);
  runtime::LaunchConfig config;
  config.grid = {static_cast<unsigned>(blocks), 1, 1};
  config.block = {k_block, 1, 1};
  config.stream = stream;
  must(m_engine.launch(*variant, config, args), "device random fill");
}

} // namespace specjit::bench
