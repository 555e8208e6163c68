// specjit-bench recompile-trace --compile-only --json: real NVRTC compiles of
// inv_rope_fp8_quant over the default 200-request trace, one fresh cache per policy, and a
// warm replay of each in a new process.
#include "test_support.h"

#include <doctest/doctest.h>

#include <map>

#ifdef SPECJIT_BENCH

TEST_CASE("recompile-trace: dynamic compiles once, exact once per count, triton at most 3, warm 0") {
  specjit::test::TempDir dir;
  specjit::test::ProcessResult run = specjit::test::run_process(
      {SPECJIT_BENCH, "recompile-trace", "--compile-only", "--json"},
      {"SPECJIT_ARCH=sm_90a", "TMPDIR=" + dir.path()});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto parsed = llvm::json::parse(run.out);
  REQUIRE_MESSAGE(static_cast<bool>(parsed), run.out);
  const llvm::json::Array* policies = parsed->getAsObject()->getArray("policies");
  REQUIRE(policies != nullptr);
  REQUIRE(policies->size() == 3);
  std::map<std::string, const llvm::json::Object*> by_name;
  for (const llvm::json::Value& value : *policies) {
    const llvm::json::Object* policy = value.getAsObject();
    REQUIRE(policy != nullptr);
    by_name[specjit::test::string_field(*policy, "policy")] = policy;
    CHECK(specjit::test::int_field(*policy, "requests") == 200);
    CHECK(specjit::test::int_field(*policy, "warm_replay_compiles") == 0);
    CHECK(policy->get("wall_seconds")->getAsNull().hasValue()); // no GPU: no wall time
  }
  REQUIRE(by_name.size() == 3);
  int64_t distinct = specjit::test::int_field(*by_name["exact"], "distinct_tokens");
  CHECK(distinct > 100); // a chat-like trace has many distinct lengths
  CHECK(specjit::test::int_field(*by_name["exact"], "compiles") == distinct);
  CHECK(specjit::test::int_field(*by_name["triton"], "compiles") <= 3);
  CHECK(specjit::test::int_field(*by_name["triton"], "compiles") >= 1);
  CHECK(specjit::test::int_field(*by_name["dynamic"], "compiles") == 1);
  double exact_seconds = *by_name["exact"]->getNumber("compile_seconds");
  double dynamic_seconds = *by_name["dynamic"]->getNumber("compile_seconds");
  CHECK(exact_seconds > 10 * dynamic_seconds);
  MESSAGE("recompile-trace table:\n" << run.err);
}

TEST_CASE("recompile-trace: a trace file is replayed as given; a bad one is a clear error") {
  specjit::test::TempDir dir;
  specjit::test::write_file(dir / "trace.txt", "1\n16\n17\n32\n1\n5\n");
  specjit::test::ProcessResult run = specjit::test::run_process(
      {SPECJIT_BENCH, "recompile-trace", "--compile-only", "--json", "--trace", dir / "trace.txt"},
      {"SPECJIT_ARCH=sm_90a", "TMPDIR=" + dir.path()});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto parsed = llvm::json::parse(run.out);
  REQUIRE(static_cast<bool>(parsed));
  for (const llvm::json::Value& value : *parsed->getAsObject()->getArray("policies")) {
    const llvm::json::Object& policy = *value.getAsObject();
    CHECK(specjit::test::int_field(policy, "requests") == 6);
    CHECK(specjit::test::int_field(policy, "distinct_tokens") == 5);
    std::string name = specjit::test::string_field(policy, "policy");
    int64_t expected = name == "exact" ? 5 : name == "triton" ? 3 : 1; // 1, %16, any
    CHECK_MESSAGE(specjit::test::int_field(policy, "compiles") == expected, name);
  }
  specjit::test::write_file(dir / "bad.txt", "12\n-3\n");
  specjit::test::ProcessResult bad = specjit::test::run_process(
      {SPECJIT_BENCH, "recompile-trace", "--compile-only", "--trace", dir / "bad.txt"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("bad.txt") != std::string::npos);
  CHECK(bad.err.find("-3") != std::string::npos);
}

#endif
