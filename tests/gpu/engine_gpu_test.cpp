// The engine on a real device: the test kernel launched for 1,000 distinct num_tokens values
// gives correct outputs from one compiled variant.
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/test_kernel.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace specjit;
using namespace specjit::runtime;

TEST_CASE("gpu: scale_tokens for 1000 distinct num_tokens is correct with one compile") {
  if (!test::gpu_or_skip("scale_tokens for 1000 distinct num_tokens"))
    return;
  test::TempDir dir;
  Engine engine(test::config_in(dir, {{"SPECJIT_ARCH", ""}}));
  auto kernel = engine.add_kernel(scale_tokens_kernel(Policy::dynamic()));
  REQUIRE(static_cast<bool>(kernel));
  REQUIRE_FALSE(static_cast<bool>(engine.make_context_current()));
  const Driver& drv = *driver();
  constexpr int cols = 128, max_tokens = 1000;
  const size_t count = static_cast<size_t>(cols) * (max_tokens + 1);
  std::vector<float> x(count), y(count);
  std::mt19937 generator(1234);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (float& v : x)
    v = uniform(generator);
  CUdeviceptr dx = 0, dy = 0;
  REQUIRE(drv.cuMemAlloc(&dx, count * 4) == CUDA_SUCCESS);
  REQUIRE(drv.cuMemAlloc(&dy, count * 4) == CUDA_SUCCESS);
  REQUIRE(drv.cuMemcpyHtoD(dx, x.data(), count * 4) == CUDA_SUCCESS);
  const float alpha = 1.5f;
  const uint32_t poison = 0x7fc0dead; // a NaN: never a correct output
  int bad = 0;
  for (int tokens = 1; tokens <= max_tokens && bad == 0; ++tokens) {
    REQUIRE(drv.cuMemsetD32(dy, poison, count) == CUDA_SUCCESS);
    auto variant = engine.get(*kernel, {cols, tokens});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    unsigned blocks = static_cast<unsigned>((tokens * cols + 255) / 256);
    llvm::Error err = engine.launch(**variant, {{blocks, 1, 1}, {256, 1, 1}, 0, nullptr}, dx, dy,
                                    tokens, alpha);
    REQUIRE_MESSAGE(!err, llvm::toString(std::move(err)));
    REQUIRE(drv.cuMemcpyDtoH(y.data(), dy, count * 4) == CUDA_SUCCESS);
    for (int t = 0; t <= tokens && t <= max_tokens; ++t)
      for (int c = 0; c < cols; ++c) {
        size_t i = static_cast<size_t>(t) * cols + c;
        uint32_t bits;
        std::memcpy(&bits, &y[i], 4);
        // The kernel's x * alpha + t is contracted to one fma by NVRTC (its default, like nvcc's).
        bool ok = t < tokens ? y[i] == std::fma(x[i], alpha, static_cast<float>(t)) : bits == poison;
        if (!ok && bad++ == 0)
          FAIL_CHECK("num_tokens " << tokens << ": y[" << t << "," << c << "] = " << y[i]);
      }
  }
  CHECK(bad == 0);
  EngineStats stats = engine.stats();
  CHECK(stats.compiles == 1);
  CHECK(stats.requests == max_tokens);
  CHECK(stats.memory_hits == max_tokens - 1);
  drv.cuMemFree(dx);
  drv.cuMemFree(dy);
}

TEST_CASE("gpu: a launch with arguments of the wrong sizes is an error, not a fault") {
  if (!test::gpu_or_skip("launch argument check"))
    return;
  test::TempDir dir;
  Engine engine(test::config_in(dir, {{"SPECJIT_ARCH", ""}}));
  auto kernel = engine.add_kernel(scale_tokens_kernel());
  REQUIRE(static_cast<bool>(kernel));
  auto variant = engine.get(*kernel, {128, 4});
  REQUIRE(static_cast<bool>(variant));
  CHECK((*variant)->param_sizes == std::vector<size_t>{8, 8, 4, 4});
  CUdeviceptr x = 0;
  double wrong = 1.0; // 8 bytes where the kernel takes a 4-byte float
  llvm::Error err = engine.launch(**variant, {}, x, x, 4, wrong);
  REQUIRE(static_cast<bool>(err));
  CHECK(llvm::toString(std::move(err)).find("sizes") != std::string::npos);
  // A cluster size that does not divide the grid is refused before the driver sees it.
  LaunchConfig clustered;
  clustered.grid = {3, 1, 1};
  clustered.block = {128, 1, 1};
  clustered.cluster_x = 2;
  llvm::Error cluster = engine.launch(**variant, clustered, x, x, 4, 1.0f);
  REQUIRE(static_cast<bool>(cluster));
  CHECK(llvm::toString(std::move(cluster)).find("not a multiple of the cluster size 2") !=
        std::string::npos);
}

TEST_CASE("gpu: the engine's device facts are the device's, read from the driver") {
  if (!test::gpu_or_skip("the engine's device facts"))
    return;
  test::TempDir dir;
  Engine engine(test::config_in(dir, {{"SPECJIT_ARCH", ""}}));
  const DeviceFacts& facts = engine.device_facts();
  CHECK(facts.from_device);
  CHECK(facts.arch == engine.arch());
  CHECK_FALSE(facts.name.empty());
  const Driver& drv = *driver();
  CUdevice device = 0;
  REQUIRE(drv.cuDeviceGet(&device, 0) == CUDA_SUCCESS);
  int sms = 0, optin = 0;
  REQUIRE(drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) ==
          CUDA_SUCCESS);
  REQUIRE(drv.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                   device) == CUDA_SUCCESS);
  CHECK(facts.multiprocessors == sms);
  CHECK(facts.shared_per_block_optin == optin);
  MESSAGE(facts.name << ": " << sms << " SMs, " << optin / 1024 << " KiB opt-in");
}
