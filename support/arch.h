// A GPU target architecture, e.g. sm_90a = {9, 0, arch_specific}. Passed as a struct, printed
// as text only at the NVRTC and JSON boundaries.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <string>

namespace specjit {

struct Arch {
  int major = 9;
  int minor = 0;
  bool arch_specific = true; // the "a" suffix: wgmma, setmaxnreg; runs only on that exact CC

  friend bool operator==(const Arch&, const Arch&) = default;
  std::string name() const; // "sm_90a"
  // Accepts "sm_90a", "sm_90", "90a", "compute_90a" is rejected (we only ship cubins).
  static llvm::Expected<Arch> parse(llvm::StringRef text);
  // The architecture for a device of compute capability major.minor: Hopper (9.0) gets the
  // arch-specific target, everything else the portable one.
  static Arch for_device(int major, int minor);
};

} // namespace specjit
