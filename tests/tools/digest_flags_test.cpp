// specjit-bench digest checks its flags before it opens a device, so a bad list is named on a
// machine without a GPU too; with good flags and no device it says what it needs.
#include "test_support.h"

#include <doctest/doctest.h>

#include <string>

#ifdef SPECJIT_BENCH

TEST_CASE("specjit-bench digest names a bad op, token list, case, dtype and model") {
  specjit::test::TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  struct Bad {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Bad& bad : {Bad{{"--op", "gemm"}, "--op must be moe, inv-rope or all, got 'gemm'"},
                         Bad{{"--tokens", "1,0"}, "--tokens takes a comma-separated list"},
                         Bad{{"--cases", "table,fast"}, "unknown case 'fast'"},
                         Bad{{"--dtypes", "fp16"}, "--dtypes takes fp8 and bf16, got 'fp16'"},
                         Bad{{"--models", "llama"}, "unknown model in --models"}}) {
    std::vector<std::string> args = {SPECJIT_BENCH, "digest"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    specjit::test::ProcessResult result = specjit::test::run_process(args, env);
    CHECK(result.exit_code == 2);
    CHECK_MESSAGE(result.err.find(bad.message) != std::string::npos, result.err);
  }
}

TEST_CASE("specjit-bench digest lists its cases in --help") {
  specjit::test::ProcessResult help =
      specjit::test::run_process({SPECJIT_BENCH, "digest", "--help"}, {});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("XXH3-128 digest of every") != std::string::npos);
}

#endif
