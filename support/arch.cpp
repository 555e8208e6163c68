#include "support/arch.h"

#include "support/error.h"

namespace specjit {

std::string Arch::name() const {
  return fmt::format("sm_{}{}{}", major, minor, arch_specific ? "a" : "");
}

llvm::Expected<Arch> Arch::parse(llvm::StringRef text) {
  llvm::StringRef rest = text.trim();
  rest.consume_front("sm_");
  Arch arch;
  arch.arch_specific = rest.consume_back("a");
  unsigned number = 0;
  if (rest.size() < 2 || rest.size() > 3 || rest.getAsInteger(10, number) || number < 50)
    return make_error(Errc::invalid_argument,
                      "'{}' is not a GPU architecture; expected a name such as sm_90a or sm_89",
                      text.str());
  arch.major = static_cast<int>(number / 10);
  arch.minor = static_cast<int>(number % 10);
  return arch;
}

Arch Arch::for_device(int major, int minor) { return Arch{major, minor, major == 9 && minor == 0}; }

} // namespace specjit
