// The example manifests (docs/examples/manifests) without a GPU: every variant the three
// reference models' manifests derive compiles for sm_90a with zero spills and no wgmma
// serialization diagnostic (ptxas C7515) through the engine's prepare.
#include "engine_fixture.h"

#include "deploy/manifest.h"
#include "runtime/engine.h"

#include <string>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;
using namespace specjit::test;

namespace {

std::vector<VariantRequest> manifest_requests(const std::string& name) {
  const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/examples/manifests/" + name;
  auto requests = parse_manifest(test::read_file(path), path);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return std::move(*requests);
}

void check_manifest_compiles(const std::string& name) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto requests = manifest_requests(name);
  CHECK(requests.size() >= 5);
  for (const VariantRequest& request : requests) {
    auto id = engine.add_kernel(request.def);
    REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
    auto variant = engine.prepare(*id, request.values);
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    INFO((*variant)->name_expression << ": " << (*variant)->registers << " registers");
    CHECK((*variant)->spill_bytes == 0);
    CHECK((*variant)->registers <= 255);
    // No serialized wgmma (C7515) or other coded wgmma diagnostic in any hot variant.
    for (const std::string& warning : (*variant)->warnings) {
      INFO("ptxas: " << warning);
      CHECK(warning.find("C75") == std::string::npos);
    }
  }
}

} // namespace

TEST_CASE("every variant of the Qwen3-30B-A3B manifest compiles for sm_90a without spills") {
  check_manifest_compiles("qwen3-30b-a3b.json");
}

TEST_CASE("every variant of the Mixtral-8x7B manifest compiles for sm_90a without spills") {
  check_manifest_compiles("mixtral-8x7b.json");
}

TEST_CASE("every variant of the DeepSeek-V3 TP8 manifest compiles for sm_90a without spills") {
  check_manifest_compiles("deepseek-v3-tp8.json");
}
