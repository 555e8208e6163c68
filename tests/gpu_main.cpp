// main() of the GPU test binary: runs the cases (each prints "[gpu] SKIPPED ..." without a
// device) and, when no device was there, exits with 77 so that ctest reports the tests as
// skipped rather than passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "runtime/driver.h"

#include <cstdio>

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int result = context.run();
  if (context.shouldExit() || result != 0)
    return result;
  if (!specjit::runtime::device_available()) {
    std::printf("[gpu] no CUDA device: every GPU test was skipped\n");
    return 77;
  }
  return 0;
}
