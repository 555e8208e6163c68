// The device data kernel of the benchmarks (tools/bench/device_random.h), without a GPU: every
// format compiles for sm_90a through an engine of its own, which writes no log. The values
// themselves are checked on a device (tests/gpu/device_random_gpu_test.cpp).
#include "device_random.h"

#include "engine_fixture.h"

#include <doctest/doctest.h>

#include <sys/stat.h>

using namespace specjit;
using specjit::test::TempDir;

TEST_CASE("the device data kernel compiles in every format, into its own root, with no log") {
  TempDir dir;
  const Config config = bench::device_random_config(test::config_in(dir), dir / "data");
  CHECK(!config.log_path().has_value());
  CHECK(!config.remote.value.has_value());
  runtime::Engine engine(config);
  for (const runtime::VariantRequest& request : bench::device_random_variants()) {
    auto id = engine.add_kernel(request.def);
    REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
    auto variant = engine.prepare(*id, request.values);
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    CHECK((*variant)->source == runtime::VariantSource::compiled);
  }
  CHECK(engine.stats().compiles == 4);
  struct stat st;
  CHECK(::stat((dir / "events.jsonl").c_str(), &st) != 0); // the measured engine's log
  CHECK(::stat((dir / "data/v1/entries/bench_device_random").c_str(), &st) == 0);
}

TEST_CASE("NVRTC reads the host's argument struct") {
  const runtime::KernelDef def = bench::device_random_kernel();
  REQUIRE(def.headers.size() == 1);
  const std::string& text = def.headers[0].text;
  CHECK(text.find("struct DeviceRandomArgs {") == 0);
  for (const char* field :
       {"unsigned long long out;", "unsigned long long count;", "unsigned long long seed;",
        "float sigma;", "float inverse_scale;", "long long range;"})
    CHECK_MESSAGE(text.find(field) != std::string::npos, field);
  CHECK(text.find("/*") == std::string::npos); // comments are gone before stringification
  CHECK(sizeof(bench::DeviceRandomArgs) == 40);
}
