// The header-only C++ wrapper (include/specjit/specjit.hpp) over the C ABI.
#include "capi_test_support.h"

#include "specjit/specjit.hpp"

using namespace specjit::test;

namespace {

specjit::Settings test_settings(const TempDir& dir) {
  specjit::Settings settings;
  settings.set("cache_dir", dir / "cache").set("log", dir / "events.jsonl").set("arch", "sm_90a");
  return settings;
}

specjit::KernelSpec scale_spec() {
  return specjit::KernelSpec::from_text("scale_rows", "scale_rows.cu", k_scale_source,
                                        "scale_rows", {{"num_tokens", "dynamic"}, {"COLS", "exact"}});
}

} // namespace

TEST_CASE("the C++ wrapper defines, prepares and counts like the C ABI") {
  TempDir dir;
  specjit::Engine engine(test_settings(dir));
  specjit::Kernel kernel = engine.define(scale_spec());
  for (int64_t tokens = 1; tokens <= 100; ++tokens)
    kernel.prepare({tokens, 64});
  specjit_stats stats = engine.stats();
  CHECK(stats.compiles == 1);
  CHECK(stats.memory_hits == 99);
  specjit_variant_info info = kernel.prepare({5, 64}).info();
  CHECK(std::string(info.name_expression) == "scale_rows<64>");
  engine.seal();
}

TEST_CASE("a failing call throws specjit::Error with the status and the message") {
  TempDir dir;
  specjit::Engine engine(test_settings(dir));
  specjit::Kernel kernel = engine.define(scale_spec());
  try {
    kernel.prepare({1, 2, 3});
    FAIL("no exception");
  } catch (const specjit::Error& error) {
    CHECK(error.status() == SPECJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(error.what()).find("takes 2 values, got 3") != std::string::npos);
  }
  CHECK_THROWS_AS(specjit::Settings().set("nonsense", "1"), specjit::Error);
  specjit::KernelSpec bad = scale_spec();
  bad.params[0].policy = "often";
  CHECK_THROWS_AS(engine.define(bad), specjit::Error);
  float* x = nullptr;
  int tokens = 1;
  // try_launch: the status instead of a throw (the variant cannot load without a module).
  specjit_status status = kernel.try_launch({1, 2, 3}, {}, x, x, tokens, 1.0f);
  CHECK(status == SPECJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("moving an engine moves its ownership") {
  TempDir dir;
  specjit::Engine first(test_settings(dir));
  specjit_engine* handle = first.get();
  specjit::Engine second(std::move(first));
  CHECK(second.get() == handle);
  CHECK(first.get() == nullptr);
  CHECK(second.stats().requests == 0);
}
