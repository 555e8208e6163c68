// The facts of a GPU that the ops size their grids and pick their tiles by: its SM count, shared
// memory and register file. An engine reads them once from the driver for its device; with no
// device to ask (precompiling in a container build), or a device of another architecture than
// the configured target, they are the documented defaults of the target, or of a device named
// by a manifest:
//
//   target or device                         SMs  shared / block (opt-in)  shared / SM
//   sm_90, sm_90a; "NVIDIA H200",             132  227 KiB                  228 KiB
//     "NVIDIA H100 80GB HBM3"
//   "NVIDIA H100 PCIe"                        114  227 KiB                  228 KiB
//   sm_80 and every other target;             108  163 KiB                  164 KiB
//     "NVIDIA A100-SXM4-80GB", "...-40GB"
//
// Every target: 2048 threads and 64 Ki 32-bit registers an SM.
#pragma once

#include "support/arch.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <string>

namespace specjit::runtime {

struct DeviceFacts {
  std::string name; // the driver's name ("NVIDIA H200"), a named device's, or empty
  Arch arch;
  int multiprocessors = 0;
  int shared_per_block_optin = 0; // bytes of shared memory a CTA may opt in to
  int shared_per_multiprocessor = 0;
  int threads_per_multiprocessor = 0;
  int registers_per_multiprocessor = 0;
  bool from_device = false; // read from a device (else the defaults above)

  friend bool operator==(const DeviceFacts&, const DeviceFacts&) = default;

  // The defaults of `arch`, named `device_name`: its facts where the table above knows it, else
  // the arch's (its arch is `arch` either way).
  static DeviceFacts for_target(const Arch& arch, llvm::StringRef device_name = {});
};

// The facts of device `ordinal`, from the driver (CudaError when it cannot say).
llvm::Expected<DeviceFacts> query_device_facts(int ordinal);

} // namespace specjit::runtime
