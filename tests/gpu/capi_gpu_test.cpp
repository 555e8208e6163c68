// The C ABI on a device (libspecjit.so): the C program's kernel (examples/c) defined from a
// string, launched through specjit_kernel_launch for many token counts (one compile, outputs
// checked against the CPU, everything past them poisoned), and the CUDA-graph capture guard.
#include "../capi/capi_test_support.h"
#include "gpu_test_support.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace specjit;
using namespace specjit::test;

namespace {

constexpr int k_cols = 256;
constexpr uint32_t k_poison_bits = 0x7fc0dead; // a NaN: never a correct output

// The engine and kernel of tests/capi, with the launch this test repeats.
struct CEngine {
  CapiEngine capi;
  specjit_engine* engine = capi.get();
  specjit_kernel* kernel = define_scale(capi.get());
  specjit_stats stats() const { return capi.stats(); }
  specjit_status launch(int tokens, CUdeviceptr x, CUdeviceptr y, float alpha, CUstream stream) {
    const int64_t values[] = {tokens, k_cols};
    const unsigned blocks = static_cast<unsigned>((tokens * k_cols + 255) / 256);
    specjit_launch_config config = {sizeof config, {blocks, 1, 1}, {256, 1, 1}, 0, stream};
    void* args[] = {&x, &y, &tokens, &alpha};
    const size_t sizes[] = {sizeof x, sizeof y, sizeof tokens, sizeof alpha};
    return specjit_kernel_launch(kernel, values, 2, &config, args, sizes, 4);
  }
};

// Rows below `tokens` are x * alpha + t (one fma, as NVRTC contracts it); the rest poison.
int count_wrong(const std::vector<float>& x, const std::vector<float>& y, int tokens, int rows,
                float alpha) {
  int wrong = 0;
  for (int t = 0; t < rows; ++t)
    for (int c = 0; c < k_cols; ++c) {
      const size_t i = static_cast<size_t>(t) * k_cols + c;
      uint32_t bits;
      std::memcpy(&bits, &y[i], 4);
      const bool ok = t < tokens ? y[i] == std::fma(x[i], alpha, static_cast<float>(t))
                                 : bits == k_poison_bits;
      if (!ok && wrong++ == 0)
        FAIL_CHECK("num_tokens " << tokens << ": y[" << t << "," << c << "] = " << y[i]);
    }
  return wrong;
}

} // namespace

TEST_CASE("gpu: the C ABI's kernel from a string is correct for many token counts, one compile") {
  if (!gpu_or_skip("C ABI kernel for many token counts"))
    return;
  CEngine c;
  const int64_t first[] = {1, k_cols};
  const specjit_variant* variant = nullptr;
  REQUIRE_OK(specjit_kernel_get(c.kernel, first, 2, &variant)); // makes the context current
  constexpr int max_tokens = 777;
  const size_t count = static_cast<size_t>(k_cols) * (max_tokens + 1);
  std::vector<float> x(count), y(count);
  std::mt19937 generator(36);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (float& v : x)
    v = uniform(generator);
  DeviceBuffer dx(count * 4), dy(count * 4);
  dx.upload(x.data());
  const float alpha = 1.25f;
  int wrong = 0;
  for (int tokens = 1; tokens <= max_tokens && wrong == 0; tokens += (tokens < 64 ? 1 : 37)) {
    REQUIRE(drv().cuMemsetD32(dy.ptr(), k_poison_bits, count) == CUDA_SUCCESS);
    REQUIRE_OK(c.launch(tokens, dx.ptr(), dy.ptr(), alpha, nullptr));
    dy.download(y.data());
    wrong += count_wrong(x, y, tokens, std::min(tokens + 1, max_tokens + 1), alpha);
  }
  CHECK(wrong == 0);
  specjit_stats stats = c.stats();
  CHECK(stats.compiles == 1);
  CHECK(stats.failures == 0);
  CHECK(events_named(read_json_lines(c.capi.log()), "compile", "scale_rows").size() == 1);
}

TEST_CASE("gpu: a launch needing a compile while the stream captures is refused, then warm "
          "capture and replay work") {
  if (!gpu_or_skip("C ABI capture guard"))
    return;
  CEngine c;
  CUdevice device = 0;
  CUcontext context = nullptr;
  REQUIRE(drv().cuDeviceGet(&device, 0) == CUDA_SUCCESS);
  REQUIRE(drv().cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS);
  REQUIRE(drv().cuCtxSetCurrent(context) == CUDA_SUCCESS);
  const int tokens = 100;
  const size_t count = static_cast<size_t>(k_cols) * (tokens + 1);
  std::vector<float> x(count, 2.0f), y(count);
  DeviceBuffer dx(count * 4), dy(count * 4);
  dx.upload(x.data());
  CUstream stream = nullptr;
  REQUIRE(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

  // Never launched: refused, nothing compiled or loaded, the capture stays valid.
  REQUIRE(drv().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(c.launch(tokens, dx.ptr(), dy.ptr(), 3.0f, stream) == SPECJIT_ERROR_CAPTURING);
  CHECK(std::string(specjit_last_error()).find("kernel scale_rows variant (num_tokens=100, "
                                               "COLS=256)") != std::string::npos);
  CHECK(std::string(specjit_last_error()).find("precompile") != std::string::npos);
  CUgraph empty = nullptr;
  REQUIRE(drv().cuStreamEndCapture(stream, &empty) == CUDA_SUCCESS);
  drv().cuGraphDestroy(empty);
  CHECK(c.stats().compiles == 0);

  // Warmed up (a launch outside the capture), the same launch is captured and replays.
  REQUIRE_OK(c.launch(1, dx.ptr(), dy.ptr(), 3.0f, stream));
  REQUIRE(drv().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  REQUIRE(drv().cuMemsetD32(dy.ptr(), k_poison_bits, count) == CUDA_SUCCESS);
  REQUIRE(drv().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE_OK(c.launch(tokens, dx.ptr(), dy.ptr(), 3.0f, stream));
  CUgraph graph = nullptr;
  REQUIRE(drv().cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  REQUIRE(drv().cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS);
  REQUIRE(drv().cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
  REQUIRE(drv().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  dy.download(y.data());
  CHECK(count_wrong(x, y, tokens, tokens + 1, 3.0f) == 0);
  CHECK(c.stats().compiles == 1);
  drv().cuGraphExecDestroy(exec);
  drv().cuGraphDestroy(graph);
  drv().cuStreamDestroy(stream);
  drv().cuDevicePrimaryCtxRelease(device);
}
