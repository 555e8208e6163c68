// specjit-bench moe's flags are checked before anything touches a device, so a bad list or value
// is named on a machine without a GPU (and without the driver) too; moe-routing needs no GPU at
// all.
#include "test_support.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <tuple>
#include <vector>

#ifdef SPECJIT_BENCH

TEST_CASE("specjit-bench moe names the bad entry of a long --tokens list, a bad --handoff, a "
          "bad --launch-order, a bad --routings, a bad --tune-routings, a bad --tune-sustain-ms, "
          "a bad --packed-reads and --table with --no-table") {
  specjit::test::TempDir dir;
  // `specjit-bench moe ARGS` exits 2 with `message` on stderr.
  auto refused = [&](std::vector<std::string> args, const std::string& message) {
    args.insert(args.begin(), {SPECJIT_BENCH, "moe"});
    INFO(fmt::format("{}", fmt::join(args, " ")));
    specjit::test::ProcessResult run = specjit::test::run_process(args, {"TMPDIR=" + dir.path()});
    CHECK(run.exit_code == 2);
    CHECK_MESSAGE(run.err.find(message) != std::string::npos, run.err);
  };
  // Longer than a string's inline buffer: the list must be read from memory that is still its.
  refused({"--tokens", "1,16,64,256,1024,4096,3"}, "--tokens: '3' is not one of");
  refused({"--tokens", "1,16,64,256,1024,4096", "--handoff", "sometimes"},
          "--handoff takes automatic, always or never, not 'sometimes'");
  refused({"--handoff", "never", "--launch-order", "row-major"},
          "--launch-order takes automatic, grouped or block-major, not 'row-major'");
  for (const char* bad : {"many", "-1", "1001"})
    refused({"--tokens", "4", "--routings", bad},
            std::string("--routings takes a count from 0 to 1000, not '") + bad + "'");
  refused({"--tune", "--tune-routings", "0"},
          "--tune-routings takes a count from 1 to 100, not '0'");
  refused({"--tune", "--tune-sustain-ms", "-5"},
          "--tune-sustain-ms takes a count from 0 to 5000, not '-5'");
  // Named before the device is opened, like the flags above (the names are the tables').
  refused({"--packed", "--packed-reads", "tma"},
          "--packed-reads takes automatic, bulk or map, not 'tma'");
  refused({"--table", "t.json", "--no-table"}, "--table and --no-table exclude each other");
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
