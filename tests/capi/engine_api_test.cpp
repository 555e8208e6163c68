// Engines through the C ABI: create, destroy, seal, stats, and bad handles (capi/engine_api.cpp,
// capi/handles.cpp).
#include "capi_test_support.h"

using namespace specjit::test;

TEST_CASE("creating an engine needs somewhere to put it") {
  CHECK_STATUS(specjit_engine_create(nullptr, nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("specjit_engine_create: out is NULL"));
}

TEST_CASE("NULL, destroyed engines and other handles are refused, never dereferenced") {
  specjit_stats stats = sized<specjit_stats>();
  CHECK_STATUS(specjit_engine_seal(nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("specjit_engine_seal: engine is NULL"));
  CHECK_STATUS(specjit_engine_stats(nullptr, &stats), SPECJIT_ERROR_INVALID_ARGUMENT);
  specjit_engine_destroy(nullptr); // ignored

  specjit_engine* destroyed = nullptr;
  specjit_kernel* orphan = nullptr;
  {
    CapiEngine engine;
    destroyed = engine.get();
    orphan = define_scale(engine.get());
    // A kernel handle passed as an engine.
    CHECK_STATUS(specjit_engine_seal(reinterpret_cast<specjit_engine*>(orphan)),
                 SPECJIT_ERROR_INVALID_ARGUMENT);
    CHECK(last_error_has("engine is a specjit_kernel, not a live specjit_engine"));
  }
  CHECK_STATUS(specjit_engine_seal(destroyed), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("engine is a destroyed specjit_engine"));
  CHECK_STATUS(specjit_engine_stats(destroyed, &stats), SPECJIT_ERROR_INVALID_ARGUMENT);
  specjit_engine_destroy(destroyed); // twice: the message says so, nothing else happens
  CHECK(last_error_has("specjit_engine_destroy"));
  // The engine's kernels died with it.
  const int64_t values[] = {1, 32};
  const specjit_variant* variant = nullptr;
  CHECK_STATUS(specjit_kernel_prepare(orphan, values, 2, &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("kernel is a kernel of a destroyed engine"));
  int not_a_handle = 0;
  CHECK_STATUS(specjit_engine_seal(reinterpret_cast<specjit_engine*>(&not_a_handle)),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("not a handle specjit created"));
}

TEST_CASE("stats need a struct_size that covers the struct") {
  CapiEngine engine;
  specjit_stats stats = sized<specjit_stats>(-8);
  CHECK_STATUS(specjit_engine_stats(engine.get(), &stats), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("out->struct_size is"));
  CHECK_STATUS(specjit_engine_stats(engine.get(), nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  stats.struct_size = sizeof stats;
  REQUIRE_OK(specjit_engine_stats(engine.get(), &stats));
  CHECK(stats.requests == 0);
}

TEST_CASE("a sealed strict engine refuses compiles with SPECJIT_ERROR_STRICT") {
  CapiEngine engine("error");
  specjit_kernel* kernel = define_scale(engine.get());
  REQUIRE_OK(specjit_engine_seal(engine.get()));
  const int64_t values[] = {3, 32};
  const specjit_variant* variant = nullptr;
  CHECK_STATUS(specjit_kernel_prepare(kernel, values, 2, &variant), SPECJIT_ERROR_STRICT);
  CHECK(last_error_has("SPECJIT_STRICT=error"));
  CHECK(variant == nullptr);
  CHECK(engine.stats().compiles == 0);
}
