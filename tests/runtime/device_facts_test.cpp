// Device facts without a GPU: the documented defaults of a target or a named device, what an
// engine reports with no device, and the default tile rule's use of the SM count.
#include "engine_fixture.h"

#include "runtime/device_facts.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/ops/moe_config.h"

using namespace specjit;
using namespace specjit::runtime;

TEST_CASE("a target's facts are its documented device's, and a named device's its own") {
  const DeviceFacts hopper = DeviceFacts::for_target(Arch{9, 0, true});
  CHECK(hopper.multiprocessors == 132);
  CHECK(hopper.shared_per_block_optin == 227 * 1024);
  CHECK(hopper.threads_per_multiprocessor == 2048);
  CHECK(hopper.registers_per_multiprocessor == 65536);
  CHECK_FALSE(hopper.from_device);
  CHECK(hopper.name.empty());
  const DeviceFacts ampere = DeviceFacts::for_target(Arch{8, 0, false});
  CHECK(ampere.multiprocessors == 108);
  CHECK(ampere.shared_per_block_optin == 163 * 1024);
  const DeviceFacts pcie = DeviceFacts::for_target(Arch{9, 0, true}, "NVIDIA H100 PCIe");
  CHECK(pcie.name == "NVIDIA H100 PCIe");
  CHECK(pcie.multiprocessors == 114);
  CHECK(pcie.arch == Arch{9, 0, true});
  // A name the table does not know: the target's defaults, under that name (a table's entries
  // for that device still serve it).
  DeviceFacts unknown = DeviceFacts::for_target(Arch{9, 0, true}, "NVIDIA H9000");
  CHECK(unknown.name == "NVIDIA H9000");
  unknown.name.clear();
  CHECK(unknown == hopper);
}

TEST_CASE("an engine without a device reports its target's facts; with one, the device's") {
  test::TempDir dir;
  Engine engine(test::config_in(dir));
  const DeviceFacts& facts = engine.device_facts();
  CHECK(&facts == &engine.device_facts()); // read once
  CHECK(facts.arch == engine.arch());
  CHECK(facts.multiprocessors > 0);
  if (device_available())
    CHECK(facts.from_device == (facts.arch == engine.arch()));
  else
    CHECK(facts == DeviceFacts::for_target(engine.arch()));
}

TEST_CASE("the default tile rule fills the target's SMs: more SMs, more CTAs per expert") {
  using namespace specjit::ops;
  // Mixtral at T = 1: two experts, GEMM1 224 CTAs of 64 columns, GEMM2 128.
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  DeviceFacts h200 = DeviceFacts::for_target(Arch{9, 0, true});
  const MoeTileConfig on_h200 = default_moe_config(mixtral, 1, h200);
  CHECK(on_h200 == default_moe_config(mixtral, 1, Arch{9, 0, true}));
  CHECK(on_h200.gemm2.warpgroups == 2); // 128 CTAs do not fill 132 SMs: K split in two
  DeviceFacts small = h200;
  small.multiprocessors = 78;
  CHECK(default_moe_config(mixtral, 1, small).gemm2.warpgroups == 1);
}
