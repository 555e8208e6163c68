// Random data made on the device, for benchmarks whose set-up must not keep the host busy
// (tp-startup: eight ranks drawing DeepSeek-V3's weights on the host kept the cores from the
// ranks being timed). Counter-based: value i of a seed is a hash of (seed, i), so any grid
// writes the same bytes for the same seed; normal values by Box-Muller (the same distribution
// as bench_data.h's host draws, not the same numbers). The fill kernel is compiled through an
// engine of its own (its own cache root, no log, no remote), so the engine being measured never
// sees it in its counters or its log.
#pragma once

#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/kernel_def.h"
#include "support/config.h"

#include <cstdint>
#include <string>
#include <vector>

// The fill kernel's one argument, read by the host compiler here and by NVRTC as an in-memory
// header (the same text, through the stringified macro).
#define SPECJIT_DEVICE_RANDOM_ARGS                                                                 \
  struct DeviceRandomArgs {                                                                        \
    unsigned long long out; /* device address of `count` values */                                 \
    unsigned long long count;                                                                      \
    unsigned long long seed;                                                                       \
    float sigma;         /* normal formats: the standard deviation */                              \
    float inverse_scale; /* e4m3: the code is value * inverse_scale, saturated at 448 */           \
    long long range;     /* i64_below: values uniform in [0, range) */                             \
  };

namespace specjit::bench {

SPECJIT_DEVICE_RANDOM_ARGS

// The kernel's template argument: what one value is.
enum class RandomFormat : int64_t { e4m3 = 0, bf16 = 1, f32 = 2, i64_below = 3 };

runtime::KernelDef device_random_kernel();
// One variant per format (what a parent prepares so that its ranks only load them).
std::vector<runtime::VariantRequest> device_random_variants();

// `base` with the random engine's own settings: root `cache_dir`, no log, no remote, no
// read-only layers, never strict.
Config device_random_config(Config base, const std::string& cache_dir);

class DeviceRandom {
public:
  explicit DeviceRandom(const Config& config); // device_random_config's
  // N(0, sigma^2) values, as e4m3 codes of value / scale, bf16 or f32.
  void normal(CUdeviceptr out, RandomFormat format, uint64_t count, uint64_t seed, float sigma,
              float scale, CUstream stream);
  // int64 values uniform in [0, range).
  void uniform_below(CUdeviceptr out, uint64_t count, uint64_t seed, int64_t range,
                     CUstream stream);

private:
  void fill(RandomFormat format, const DeviceRandomArgs& args, CUstream stream);

  runtime::Engine m_engine;
  runtime::KernelId m_kernel;
};

} // namespace specjit::bench
