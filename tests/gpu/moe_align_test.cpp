// moe_align on the GPU against the reference's grouping (check_align in fused_moe_support.cpp).
#include "engine_fixture.h"
#include "gpu/fused_moe_support.h"
#include "gpu/gpu_test_support.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::ops;
using namespace specjit::test::moe_gpu;
using specjit::runtime::Engine;
using specjit::test::require_ok;
using specjit::test::TempDir;

TEST_CASE("moe_align groups every expert's slots before its padding, stable in order (8 to 1024 "
          "experts)") {
  if (!specjit::test::gpu_or_skip("moe_align grouping"))
    return;
  TempDir dir;
  Engine engine(test::config_in(dir));
  require_ok(engine.make_context_current());
  for (bool stable : {true, false}) {
    check_align(engine, 8, 4096, 2, 128, stable);
    check_align(engine, 128, 1000, 8, 64, stable);
    check_align(engine, 256, 4096, 8, 16, stable);
    check_align(engine, 257, 1, 8, 8, stable); // fewer slots than chunks
    check_align(engine, 512, 2000, 8, 32, stable);
    check_align(engine, 1024, 4096, 8, 16, stable);
  }
}
