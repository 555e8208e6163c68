// Tests of the C ABI (tests/capi): they link libspecjit.so alone, so they see exactly what an
// embedding program sees. An engine on a temporary cache, and the test kernel.
#pragma once

#include "test_support.h"

#include "specjit/specjit.h"

#include <doctest/doctest.h>

#include <string>

namespace specjit::test {

// Expects `call` to return `status`; on a mismatch the message shows the library's text.
#define CHECK_STATUS(call, status)                                                               \
  do {                                                                                           \
    specjit_status checked_status_ = (call);                                                     \
    CHECK_MESSAGE(checked_status_ == (status), std::string(specjit_status_name(checked_status_)) << ": " \
                                                   << std::string(specjit_last_error()));                     \
  } while (0)
#define REQUIRE_OK(call)                                                                         \
  do {                                                                                           \
    specjit_status checked_status_ = (call);                                                     \
    REQUIRE_MESSAGE(checked_status_ == SPECJIT_OK, std::string(specjit_status_name(checked_status_)) << ": " \
                                                       << std::string(specjit_last_error()));                 \
  } while (0)

// A caller-filled struct, zeroed, its struct_size sizeof it (plus `adjust`, to test the check).
template <typename T> T sized(long adjust = 0) {
  T value{};
  value.struct_size = static_cast<size_t>(static_cast<long>(sizeof(T)) + adjust);
  return value;
}

inline bool last_error_has(const std::string& text) {
  return std::string(specjit_last_error()).find(text) != std::string::npos;
}

// An engine whose cache root, log and target architecture are the test's own.
class CapiEngine {
public:
  explicit CapiEngine(const std::string& strict = "") {
    specjit_settings* settings = nullptr;
    REQUIRE_OK(specjit_settings_create(&settings));
    REQUIRE_OK(specjit_settings_set(settings, "cache_dir", (m_dir / "cache").c_str()));
    REQUIRE_OK(specjit_settings_set(settings, "log", log().c_str()));
    REQUIRE_OK(specjit_settings_set(settings, "arch", "sm_90a"));
    REQUIRE_OK(specjit_settings_set(settings, "cache_readonly_dirs", ""));
    if (!strict.empty())
      REQUIRE_OK(specjit_settings_set(settings, "strict", strict.c_str()));
    REQUIRE_OK(specjit_engine_create(settings, &m_engine));
    specjit_settings_destroy(settings);
  }
  ~CapiEngine() { specjit_engine_destroy(m_engine); }
  CapiEngine(const CapiEngine&) = delete;
  CapiEngine& operator=(const CapiEngine&) = delete;

  specjit_engine* get() const { return m_engine; }
  std::string log() const { return m_dir / "events.jsonl"; }
  const TempDir& dir() const { return m_dir; }
  specjit_stats stats() const {
    specjit_stats stats = sized<specjit_stats>();
    REQUIRE_OK(specjit_engine_stats(m_engine, &stats));
    return stats;
  }

private:
  TempDir m_dir;
  specjit_engine* m_engine = nullptr;
};

// The C program's kernel (examples/c): y[t, c] = x[t, c] * alpha + t for t < num_tokens, c <
// COLS; num_tokens dynamic (a plain argument), COLS exact.
inline constexpr const char* k_scale_source = R"(
template <int COLS>
__global__ void scale_rows(const float* x, float* y, int num_tokens, float alpha) {
  long long total = (long long)num_tokens * COLS;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i] * alpha + (float)(i / COLS);
}
)";

inline specjit_kernel_desc scale_desc(const specjit_param (&params)[2]) {
  specjit_kernel_desc desc = sized<specjit_kernel_desc>();
  desc.id = "scale_rows";
  desc.source_kind = SPECJIT_SOURCE_TEXT;
  desc.source_name = "scale_rows.cu";
  desc.source_text = k_scale_source;
  desc.function = "scale_rows";
  desc.params = params;
  desc.param_count = 2;
  return desc;
}

inline const specjit_param k_scale_params[2] = {{"num_tokens", "dynamic"}, {"COLS", "exact"}};

inline specjit_kernel* define_scale(specjit_engine* engine) {
  specjit_kernel_desc desc = scale_desc(k_scale_params);
  specjit_kernel* kernel = nullptr;
  REQUIRE_OK(specjit_kernel_define(engine, &desc, &kernel));
  return kernel;
}

} // namespace specjit::test
