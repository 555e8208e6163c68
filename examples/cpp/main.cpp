// Bring your own kernel, from C++ (specjit/specjit.hpp over the C ABI): the same kernel as
// examples/c, with RAII handles and exceptions. Prepares 1,000 token counts and prints the
// engine's counters.
//
//   cmake -S examples/cpp -B build-cpp -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-cpp
#include <specjit/specjit.hpp>

#include <optional>

#include <cstdio>

namespace {

constexpr const char* k_source = R"(
template <int COLS>
__global__ void scale_rows(const float* x, float* y, int num_tokens, float alpha) {
  long long total = (long long)num_tokens * COLS;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i] * alpha + (float)(i / COLS);
}
)";

} // namespace

int main() try {
  specjit::Engine engine; // SPECJIT_* environment
  specjit::Kernel kernel = engine.define(specjit::KernelSpec::from_text(
      "scale_rows", "scale_rows.cu", k_source, "scale_rows",
      {{"num_tokens", "dynamic"}, {"COLS", "exact"}}));
  // num_tokens is dynamic: all 1,000 requests share one variant.
  std::optional<specjit::Variant> variant;
  for (int64_t tokens = 1; tokens <= 1000; ++tokens)
    variant = kernel.prepare({tokens, 256});
  specjit_variant_info info = variant->info();
  specjit_stats stats = engine.stats();
  std::printf("variant %s (%d registers)\n", info.name_expression, info.registers);
  std::printf("requests=%llu memory_hits=%llu disk_hits=%llu compiles=%llu failures=%llu\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.memory_hits),
              static_cast<unsigned long long>(stats.disk_hits),
              static_cast<unsigned long long>(stats.compiles),
              static_cast<unsigned long long>(stats.failures));
  return 0;
} catch (const specjit::Error& error) {
  std::fprintf(stderr, "%s\n", error.what());
  return 1;
}
