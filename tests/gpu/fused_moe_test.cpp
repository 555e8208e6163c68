// fused_moe on the GPU for the three reference models (fused_moe_support.h has the checks): the
// default rule's configurations, the built-in table's (each device's tuned entries), and GEMM1
// on e4m3 tensor cores against the accuracy rule.
#include "engine_fixture.h"
#include "gpu/fused_moe_support.h"
#include "gpu/gpu_test_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace specjit;
using namespace specjit::ops;
using namespace specjit::test::moe_gpu;
using specjit::runtime::Engine;
using specjit::test::require_ok;
using specjit::test::TempDir;

TEST_CASE("fused_moe FP8 matches the emulating reference for Qwen3-30B-A3B") {
  if (!specjit::test::gpu_or_skip("fused_moe fp8 qwen3"))
    return;
  run_model(k_qwen);
}

TEST_CASE("fused_moe FP8 matches the emulating reference for Mixtral-8x7B") {
  if (!specjit::test::gpu_or_skip("fused_moe fp8 mixtral"))
    return;
  run_model(k_mixtral);
}

TEST_CASE("fused_moe FP8 matches the emulating reference for DeepSeek-V3 TP8") {
  if (!specjit::test::gpu_or_skip("fused_moe fp8 deepseek"))
    return;
  run_model(k_deepseek);
}

TEST_CASE("fused_moe bf16 matches the fp32 reference for Qwen3-30B-A3B") {
  if (!specjit::test::gpu_or_skip("fused_moe bf16 qwen3"))
    return;
  run_model(as_bf16(k_qwen));
}

TEST_CASE("fused_moe bf16 matches the fp32 reference for Mixtral-8x7B") {
  if (!specjit::test::gpu_or_skip("fused_moe bf16 mixtral"))
    return;
  run_model(as_bf16(k_mixtral));
}

TEST_CASE("GEMM1 on e4m3 tensor cores meets the accuracy rule at every token count (three "
          "models)") {
  if (!specjit::test::gpu_or_skip("fused_moe e4m3 GEMM1"))
    return;
  for (const Model& model : {k_qwen, k_mixtral, k_deepseek})
    run_model(model, Forced::wgmma_e4m3);
}

TEST_CASE("GEMM1 on e4m3 tensor cores over the whole K meets the accuracy rule at every token "
          "count (three models)") {
  if (!specjit::test::gpu_or_skip("fused_moe e4m3 GEMM1, whole K"))
    return;
  for (const Model& model : {k_qwen, k_mixtral, k_deepseek})
    run_model(model, Forced::wgmma_e4m3w);
}

TEST_CASE("GEMM1 on the sorted e4m3 copy of the tokens meets the accuracy rule at every token "
          "count (Mixtral)") {
  if (!specjit::test::gpu_or_skip("fused_moe e4m3 GEMM1, sorted tokens"))
    return;
  run_model(k_mixtral, Forced::wgmma_e4m3_sorted);
}

// The devices the built-in table has entries for (ops/moe/tables/moe-configs.json).
static std::vector<std::string> builtin_table_devices() {
  std::vector<std::string> devices;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries)
    if (std::find(devices.begin(), devices.end(), entry.device) == devices.end())
      devices.push_back(entry.device);
  return devices;
}

// The built-in table's entries for one device, their device names cleared, so that that device's
// tiles run on the Hopper GPU the suite runs on (an entry that names another device would leave
// the default rule to decide, and the cases below would not check the table's tiles).
static MoeConfigTable builtin_table_of(const std::string& device) {
  MoeConfigTable table;
  for (const MoeConfigEntry& entry : builtin_moe_config_table().entries)
    if (entry.device == device) {
      table.entries.push_back(entry);
      table.entries.back().device.clear();
    }
  return table;
}

// The built-in table (ops/moe/tables/moe-configs.json as built; ops/moe/builtin_table.h): what
// TunedMoeOptions holds by default, so what a caller that names no table runs on a device the
// table names. Each device's entries in turn: every FP8 bucket's configuration, at a token count
// in each bucket.
TEST_CASE("the built-in table's configuration is right in every bucket of every device (FP8, "
          "three models)") {
  if (!specjit::test::gpu_or_skip("fused_moe built-in table"))
    return;
  REQUIRE(TunedMoeOptions{}.table == &builtin_moe_config_table());
  const std::vector<std::string> devices = builtin_table_devices();
  REQUIRE(devices.size() >= 2); // the H200's entries and the H100's
  for (const std::string& device : devices) {
    INFO("entries for " << device);
    const MoeConfigTable table = builtin_table_of(device);
    const auto facts = runtime::DeviceFacts::for_target(Arch{9, 0, true}, device);
    for (const Model& model : {k_qwen, k_mixtral, k_deepseek}) {
      REQUIRE(builtin_moe_config_table().find(model.shape, facts) != nullptr);
      run_model(model, Forced::none, MoeHandoff::automatic, 1, MoeLaunchOrder::automatic, &table);
      // Packed weights: the shape's packed entry where the device has one, else its row-major
      // entry's tiles reading packed weights.
      run_model(model, Forced::none, MoeHandoff::automatic, 1, MoeLaunchOrder::automatic, &table,
                MoeWeightLayout::packed);
    }
  }
}

// The same tables under exact accumulation: their e4m3 tiles run as f16 ones (with the stages
// that fit beside the f16 copy of the weights), within the emulating reference's bound.
TEST_CASE("the built-in table is right under exact accumulation in every bucket of every device "
          "(FP8, three models)") {
  if (!specjit::test::gpu_or_skip("fused_moe built-in table, exact accumulation"))
    return;
  for (const std::string& device : builtin_table_devices()) {
    INFO("entries for " << device);
    const MoeConfigTable table = builtin_table_of(device);
    for (const Model& model : {k_qwen, k_mixtral, k_deepseek})
      run_model(model, Forced::none, MoeHandoff::automatic, 1, MoeLaunchOrder::automatic, &table,
                MoeWeightLayout::row_major, MoeAccumulation::exact);
  }
}

TEST_CASE("fused_moe bf16 matches the fp32 reference for DeepSeek-V3 TP8") {
  if (!specjit::test::gpu_or_skip("fused_moe bf16 deepseek"))
    return;
  run_model(as_bf16(k_deepseek));
}
