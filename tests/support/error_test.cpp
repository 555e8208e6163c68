// Errors carry their kind as a std::error_code of their own category, so that a caller can tell
// them apart with llvm::errorToErrorCode.
#include "support/error.h"

#include <doctest/doctest.h>

#include <set>

using namespace specjit;

TEST_CASE("every Errc converts to an error code of its own, named by errc_name") {
  const Errc all[] = {Errc::invalid_argument, Errc::not_found,      Errc::io,
                      Errc::corrupt,          Errc::unsupported,    Errc::strict_violation,
                      Errc::timeout,          Errc::compile_failed, Errc::driver};
  std::set<int> seen;
  for (Errc code : all) {
    std::error_code converted = llvm::errorToErrorCode(make_error(code, "x"));
    CHECK(converted == code);
    CHECK(&converted.category() == &specjit_category());
    CHECK(converted.message() == errc_name(code).str());
    seen.insert(converted.value());
  }
  CHECK(seen.size() == std::size(all));
  CHECK(llvm::errorToErrorCode(make_error(Errc::strict_violation, "x")) != Errc::unsupported);
}
