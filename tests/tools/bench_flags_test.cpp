// specjit-bench moe's flags are checked before anything touches a device, so a bad list or value
// is named on a machine without a GPU (and without the driver) too.
#include "test_support.h"

#include <doctest/doctest.h>

#ifdef SPECJIT_BENCH

TEST_CASE("specjit-bench moe names the bad entry of a long --tokens list, a bad --handoff, a "
          "bad --launch-order, a bad --routings and a bad --tune-routings") {
  specjit::test::TempDir dir;
  // Longer than a string's inline buffer: the list must be read from memory that is still its.
  specjit::test::ProcessResult tokens = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--tokens", "1,16,64,256,1024,4096,3"}, {"TMPDIR=" + dir.path()});
  CHECK(tokens.exit_code == 2);
  CHECK_MESSAGE(tokens.err.find("--tokens: '3' is not one of") != std::string::npos, tokens.err);

  specjit::test::ProcessResult handoff = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--tokens", "1,16,64,256,1024,4096", "--handoff", "sometimes"},
      {"TMPDIR=" + dir.path()});
  CHECK(handoff.exit_code == 2);
  CHECK_MESSAGE(handoff.err.find("--handoff takes automatic, always or never, not 'sometimes'") !=
                    std::string::npos,
                handoff.err);

  specjit::test::ProcessResult order = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--handoff", "never", "--launch-order", "row-major"},
      {"TMPDIR=" + dir.path()});
  CHECK(order.exit_code == 2);
  CHECK_MESSAGE(order.err.find("--launch-order takes automatic, grouped or block-major, not "
                               "'row-major'") != std::string::npos,
                order.err);

  for (const char* bad : {"many", "-1", "1001"}) {
    specjit::test::ProcessResult routings = specjit::test::run_process(
        {SPECJIT_BENCH, "moe", "--tokens", "4", "--routings", bad}, {"TMPDIR=" + dir.path()});
    CHECK(routings.exit_code == 2);
    CHECK_MESSAGE(routings.err.find(std::string("--routings takes a count from 0 to 1000, not '") +
                                    bad + "'") != std::string::npos,
                  routings.err);
  }
  specjit::test::ProcessResult tune = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--tune", "--tune-routings", "0"}, {"TMPDIR=" + dir.path()});
  CHECK(tune.exit_code == 2);
  CHECK_MESSAGE(tune.err.find("--tune-routings takes a count from 1 to 100, not '0'") !=
                    std::string::npos,
                tune.err);
}

#endif
