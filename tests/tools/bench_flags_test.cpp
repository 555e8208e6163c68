// specjit-bench moe's flags are checked before anything touches a device, so a bad list or value
// is named on a machine without a GPU (and without the driver) too; moe-routing needs no GPU at
// all.
#include "test_support.h"

#include <doctest/doctest.h>

#include <string>
#include <tuple>

#ifdef SPECJIT_BENCH

TEST_CASE("specjit-bench moe names the bad entry of a long --tokens list, a bad --handoff, a "
          "bad --launch-order, a bad --routings, a bad --tune-routings, a bad --tune-sustain-ms, "
          "a bad --packed-reads and --table with --no-table") {
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
  specjit::test::ProcessResult sustain = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--tune", "--tune-sustain-ms", "-5"}, {"TMPDIR=" + dir.path()});
  CHECK(sustain.exit_code == 2);
  CHECK_MESSAGE(sustain.err.find("--tune-sustain-ms takes a count from 0 to 5000, not '-5'") !=
                    std::string::npos,
                sustain.err);

  // Named before the device is opened, like the flags above (the names are the tables').
  specjit::test::ProcessResult reads = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--packed", "--packed-reads", "tma"}, {"TMPDIR=" + dir.path()});
  CHECK(reads.exit_code == 2);
  CHECK_MESSAGE(reads.err.find("--packed-reads takes automatic, bulk or map, not 'tma'") !=
                    std::string::npos,
                reads.err);
  specjit::test::ProcessResult tables = specjit::test::run_process(
      {SPECJIT_BENCH, "moe", "--table", "t.json", "--no-table"}, {"TMPDIR=" + dir.path()});
  CHECK(tables.exit_code == 2);
  CHECK_MESSAGE(tables.err.find("--table and --no-table exclude each other") != std::string::npos,
                tables.err);
}

TEST_CASE("specjit-bench moe-routing rebuilds the fixed routing's blocks and names bad flags") {
  specjit::test::TempDir dir;
  const std::string json = dir.path() + "/routing.json";
  specjit::test::ProcessResult run =
      specjit::test::run_process({SPECJIT_BENCH, "moe-routing", "--models", "mixtral", "--tokens",
                                  "1024", "--routings", "3", "--json", json},
                                 {"TMPDIR=" + dir.path()});
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  // Seed 42 (the main figures' routing): 8 experts, 19 blocks of 128, 2144 swap-AB MMA columns,
  // 2240 normal-orientation rows.
  CHECK_MESSAGE(run.out.find("   42        8     19         2144        2240") != std::string::npos,
                run.out);
  CHECK(specjit::test::read_file(json).find("\"swap_columns\": 2144") != std::string::npos);

  for (const auto& [flag, value, message] :
       {std::tuple{"--tokens", "abc", "--tokens takes a count from 1 to 4096, not 'abc'"},
        std::tuple{"--tokens", "5000", "--tokens takes a count from 1 to 4096, not '5000'"},
        std::tuple{"--routings", "-1", "--routings takes a count from 0 to 1000, not '-1'"},
        std::tuple{"--block-m", "12", "--block-m must be a multiple of 8, got 12"},
        std::tuple{"--models", "llama",
                   "--models 'llama' names none of the models (by their first five letters): "
                   "qwen3-30b-a3b"}}) {
    specjit::test::ProcessResult bad = specjit::test::run_process(
        {SPECJIT_BENCH, "moe-routing", flag, value}, {"TMPDIR=" + dir.path()});
    CHECK(bad.exit_code == 2);
    CHECK_MESSAGE(bad.err.find(message) != std::string::npos, bad.err);
  }
}

#endif
