#include "runtime/device_facts.h"

#include "runtime/driver.h"

namespace specjit::runtime {

namespace {

struct KnownDevice {
  const char* name;
  int multiprocessors;
  int shared_per_block_optin_kib;
};
// The devices the table in device_facts.h names; each has its target's other facts.
constexpr KnownDevice k_known[] = {
    {"NVIDIA H200", 132, 227},           {"NVIDIA H100 80GB HBM3", 132, 227},
    {"NVIDIA H100 PCIe", 114, 227},      {"NVIDIA A100-SXM4-80GB", 108, 163},
    {"NVIDIA A100-SXM4-40GB", 108, 163},
};

} // namespace

DeviceFacts DeviceFacts::for_target(const Arch& arch, llvm::StringRef device_name) {
  DeviceFacts facts;
  facts.arch = arch;
  const bool hopper = arch.major == 9;
  facts.multiprocessors = hopper ? 132 : 108;
  facts.shared_per_block_optin = (hopper ? 227 : 163) * 1024;
  facts.threads_per_multiprocessor = 2048;
  facts.registers_per_multiprocessor = 65536;
  facts.name = device_name.str();
  for (const KnownDevice& known : k_known)
    if (device_name == known.name) {
      facts.multiprocessors = known.multiprocessors;
      facts.shared_per_block_optin = known.shared_per_block_optin_kib * 1024;
    }
  // A CTA's opt-in limit is the SM's shared memory less the 1 KiB the driver reserves per CTA.
  facts.shared_per_multiprocessor = facts.shared_per_block_optin + 1024;
  return facts;
}

llvm::Expected<DeviceFacts> query_device_facts(int ordinal) {
  auto drv = driver();
  if (!drv)
    return drv.takeError();
  CUdevice device = 0;
  if (auto err = drv->check(drv->cuDeviceGet(&device, ordinal), "cuDeviceGet"))
    return err;
  DeviceFacts facts;
  facts.from_device = true;
  char name[256] = {};
  if (auto err = drv->check(drv->cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName"))
    return err;
  facts.name = name;
  int major = 0, minor = 0;
  const std::pair<CUdevice_attribute, int*> attributes[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &facts.multiprocessors},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &facts.shared_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &facts.shared_per_multiprocessor},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &facts.threads_per_multiprocessor},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &facts.registers_per_multiprocessor},
  };
  for (auto [attribute, value] : attributes)
    if (auto err =
            drv->check(drv->cuDeviceGetAttribute(value, attribute, device), "cuDeviceGetAttribute"))
      return err;
  facts.arch = Arch::for_device(major, minor);
  return facts;
}

} // namespace specjit::runtime
