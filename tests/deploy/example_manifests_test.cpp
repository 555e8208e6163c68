// The example manifests (docs/examples/manifests) without a GPU: every variant the three
// reference models' manifests derive compiles for sm_90a with zero spills and no wgmma
// serialization diagnostic (ptxas C7515) through the engine's prepare, on row-major weights and
// (the FP8 models, whose tables have packed entries) on packed ones, and for the other device the
// built-in table has entries for (the H100).
#include "engine_fixture.h"

#include "deploy/manifest.h"
#include "kernels_src/moe/gemm_args.h"
#include "runtime/engine.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;
using namespace specjit::test;

namespace {

// The manifest's requests; with `packed`, its FP8 models on packed weights; with `device`, its
// FP8 model for that device instead of the H200 (the table's entries for it).
std::vector<VariantRequest> manifest_requests(const std::string& name, bool packed,
                                              const std::string& device = {}) {
  const std::string path = std::string(SPECJIT_SOURCE_DIR) + "/docs/examples/manifests/" + name;
  std::string text = test::read_file(path);
  if (!device.empty()) {
    const std::string h200 = "\"device\": \"NVIDIA H200\"";
    const size_t at = text.find(h200, text.find("\"dtype\": \"fp8\","));
    REQUIRE(at != std::string::npos);
    text.replace(at, h200.size(), "\"device\": \"" + device + "\"");
  }
  if (packed) {
    const std::string fp8 = "\"dtype\": \"fp8\",";
    const size_t at = text.find(fp8);
    REQUIRE(at != std::string::npos);
    text.insert(at + fp8.size(), " \"weights\": \"packed\",");
  }
  auto requests = parse_manifest(text, path);
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return std::move(*requests);
}

void check_manifest_compiles(const std::string& name, bool packed = false,
                             const std::string& device = {}) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto requests = manifest_requests(name, packed, device);
  CHECK(requests.size() >= 5);
  // A packed model's GEMMs read packed weights (the template value `weights`).
  CHECK(std::any_of(requests.begin(), requests.end(), [](const VariantRequest& r) {
          for (size_t i = 0; i < r.def.params.size(); ++i)
            if (r.def.params[i].name == "weights" &&
                r.values[i] != static_cast<int64_t>(specjit_kernels::MoeWeightReads::row_major_map))
              return true;
          return false;
        }) == packed);
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

TEST_CASE("every variant of the three manifests' FP8 models on packed weights compiles for sm_90a "
          "without spills") {
  for (const char* name : {"qwen3-30b-a3b.json", "mixtral-8x7b.json", "deepseek-v3-tp8.json"}) {
    INFO(name);
    check_manifest_compiles(name, true);
  }
}

TEST_CASE("every variant of the three manifests' FP8 models on the H100 (the built-in table's H100 "
          "entries), on both weight layouts, compiles for sm_90a without spills") {
  for (const char* name : {"qwen3-30b-a3b.json", "mixtral-8x7b.json", "deepseek-v3-tp8.json"}) {
    INFO(name);
    // The H100's entries are tiles of their own, not the H200's again.
    auto variants = [&](const std::string& device) {
      std::set<std::pair<std::string, std::vector<int64_t>>> out;
      for (const VariantRequest& r : manifest_requests(name, false, device))
        out.insert({r.def.id, r.values});
      return out;
    };
    CHECK(variants("NVIDIA H100 80GB HBM3") != variants({}));
    check_manifest_compiles(name, false, "NVIDIA H100 80GB HBM3");
    // Packed weights on the H100 run its row-major entries' tiles, reading packed weights.
    check_manifest_compiles(name, true, "NVIDIA H100 80GB HBM3");
  }
}
