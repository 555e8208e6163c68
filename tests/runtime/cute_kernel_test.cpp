// A CuTe kernel of our own (examples/cute/cute_scale.cu) compiled through the engine against
// the CUTLASS headers of `pip install nvidia-cutlass` (SPECJIT_CUTLASS_INCLUDE; the test says
// so and passes without them). Real NVRTC compiles, no GPU.
#include "cute_kernel_support.h"
#include "engine_fixture.h"

#include "runtime/engine.h"

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

TEST_CASE("a CuTe kernel compiles once for many token counts and a fresh engine reads it") {
  std::string cutlass = test::cutlass_include();
  if (cutlass.empty()) {
    MESSAGE("SKIPPED: SPECJIT_CUTLASS_INCLUDE does not name a CUTLASS include tree");
    return;
  }
  TempDir dir;
  Config config = test::config_in(dir);
  Engine engine(config);
  auto id = engine.add_kernel(test::cute_kernel(config, cutlass));
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  const Variant* first = nullptr;
  for (int64_t tokens : {1, 7, 64, 129, 1000, 4096}) {
    auto variant = engine.prepare(*id, {tokens, 16});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    if (first == nullptr)
      first = *variant;
    CHECK(*variant == first);
  }
  CHECK(first->name_expression == "cute_scale<16>");
  CHECK(engine.stats().compiles == 1);

  Engine fresh(config);
  auto fresh_id = fresh.add_kernel(test::cute_kernel(config, cutlass));
  REQUIRE(static_cast<bool>(fresh_id));
  auto again = fresh.prepare(*fresh_id, {33, 16});
  REQUIRE_MESSAGE(static_cast<bool>(again), llvm::toString(again.takeError()));
  CHECK((*again)->source == VariantSource::disk);
  CHECK((*again)->key == first->key);
  CHECK(fresh.stats().compiles == 0);
}
