// The CuTe kernel (examples/cute/cute_scale.cu) on a real device: random inputs, poisoned
// outputs, many token counts from one compiled variant, checked against the CPU.
#include "cute_kernel_support.h"
#include "engine_fixture.h"
#include "gpu_test_support.h"

#include "runtime/engine.h"

#include <cstring>
#include <random>

using namespace specjit;
using namespace specjit::runtime;

TEST_CASE("gpu: the CuTe kernel is correct for many token counts with one compile") {
  if (!test::gpu_or_skip("CuTe kernel for many token counts"))
    return;
  std::string cutlass = test::cutlass_include();
  if (cutlass.empty()) {
    MESSAGE("SKIPPED: SPECJIT_CUTLASS_INCLUDE does not name a CUTLASS include tree");
    return;
  }
  test::TempDir dir;
  Config config = test::config_in(dir, {{"SPECJIT_ARCH", ""}});
  Engine engine(config);
  auto kernel = engine.add_kernel(test::cute_kernel(config, cutlass));
  REQUIRE_MESSAGE(static_cast<bool>(kernel), llvm::toString(kernel.takeError()));
  REQUIRE_FALSE(static_cast<bool>(engine.make_context_current()));
  const Driver& drv = *driver();
  constexpr int cols = 128, tile_m = 16, max_tokens = 2100;
  const size_t count = static_cast<size_t>(cols) * (max_tokens + tile_m);
  std::vector<float> x(count), y(count);
  std::mt19937 generator(4321);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (float& v : x)
    v = uniform(generator);
  CUdeviceptr dx = 0, dy = 0;
  REQUIRE(drv.cuMemAlloc(&dx, count * 4) == CUDA_SUCCESS);
  REQUIRE(drv.cuMemAlloc(&dy, count * 4) == CUDA_SUCCESS);
  REQUIRE(drv.cuMemcpyHtoD(dx, x.data(), count * 4) == CUDA_SUCCESS);
  const float scale = 0.75f;
  const uint32_t poison = 0x7fc0dead; // a NaN: never a correct output
  const std::vector<int> token_counts = {1, 2, 15, 16, 17, 100, 255, 256, 1000, 1023, 2048, 2100};
  int bad = 0;
  for (int tokens : token_counts) {
    REQUIRE(drv.cuMemsetD32(dy, poison, count) == CUDA_SUCCESS);
    auto variant = engine.get(*kernel, {tokens, tile_m});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    unsigned blocks = static_cast<unsigned>((tokens + tile_m - 1) / tile_m);
    llvm::Error err = engine.launch(**variant, {{blocks, 1, 1}, {128, 1, 1}, 0, nullptr}, dx, dy,
                                    scale, tokens);
    REQUIRE_MESSAGE(!err, llvm::toString(std::move(err)));
    REQUIRE(drv.cuMemcpyDtoH(y.data(), dy, count * 4) == CUDA_SUCCESS);
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &y[i], 4);
      bool inside = i < static_cast<size_t>(tokens) * cols;
      bool ok = inside ? y[i] == x[i] * scale : bits == poison;
      if (!ok && bad++ == 0)
        FAIL_CHECK("num_tokens " << tokens << ": out[" << i / cols << "," << i % cols
                                 << "] = " << y[i]);
    }
  }
  CHECK(bad == 0);
  CHECK(engine.stats().compiles == 1);
  CHECK(engine.stats().memory_hits == token_counts.size() - 1);
  drv.cuMemFree(dx);
  drv.cuMemFree(dy);
}
