// Device facts without a GPU: the documented defaults of a target or a named device, and what an
// engine reports with no device.
#include "engine_fixture.h"

#include "runtime/device_facts.h"
#include "runtime/driver.h"
#include "runtime/engine.h"

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
