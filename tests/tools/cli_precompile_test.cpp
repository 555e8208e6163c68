// specjit precompile, end to end through the real binary (no GPU: NVRTC only).
#include "cli_test_support.h"

using namespace specjit::test;

TEST_CASE("a second precompile of the same manifest compiles nothing") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3]"));
  llvm::json::Object first = cli.json({"precompile", "--manifest", manifest, "-j", "2"});
  CHECK(field(first, "variants") == 3);
  CHECK(field(first, "compiled") == 3);
  CHECK(field(first, "reused") == 0);
  CHECK(field(first, "failed") == 0);
  CHECK(first.getNumber("seconds").hasValue());
  llvm::json::Object second = cli.json({"precompile", "--manifest", manifest});
  CHECK(field(second, "compiled") == 0);
  CHECK(field(second, "reused") == 3);
  ProcessResult text = cli.run({"precompile", "--manifest", manifest});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("0 compiled, 3 reused, 0 failed") != std::string::npos);
}

TEST_CASE("precompile without a manifest prepares the built-in default variants") {
  Cli cli;
  llvm::json::Object result = cli.json({"precompile"});
  CHECK(field(result, "variants") >= 1);
  CHECK(field(result, "failed") == 0);
  CHECK(field(result, "compiled") == field(result, "variants"));
}

TEST_CASE("precompile with several --arch flags compiles each variant for each architecture") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2]"));
  llvm::json::Object result =
      cli.json({"precompile", "--manifest", manifest, "--arch", "sm_90a", "--arch", "sm_80"});
  CHECK(field(result, "variants") == 4);
  CHECK(field(result, "compiled") == 4);
  std::set<std::string> arches;
  llvm::json::Object listing = cli.json({"ls"});
  for (const llvm::json::Value& entry : *listing.getArray("entries"))
    arches.insert(entry.getAsObject()->getString("arch")->str());
  CHECK(arches == std::set<std::string>{"sm_80", "sm_90a"});
}

TEST_CASE("--from-log of a run's log reproduces exactly its variants in a fresh root") {
  Cli cli;
  // Two definitions of one kernel (exact and dynamic num_tokens) and a disk hit in the log.
  std::string manifest = cli.write("m.json", R"({"variants": [
    {"kernel": "scale_tokens", "values": {"cols": 64, "num_tokens": [1, 5]},
     "policies": {"num_tokens": "exact"}},
    {"kernel": "scale_tokens", "values": {"cols": 32, "num_tokens": 7}}]})");
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  std::string fresh = cli.path("fresh");
  llvm::json::Object replay =
      cli.json({"precompile", "--from-log", cli.log(), "--cache-dir", fresh}, 0,
               {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(field(replay, "variants") == 3);
  CHECK(field(replay, "compiled") == 3);
  CHECK(cli.keys(fresh) == cli.keys(cli.cache()));
  CHECK(cli.keys(fresh).size() == 3);
}

TEST_CASE("a malformed manifest names file, line and field, exits 2 and changes nothing") {
  Cli cli;
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"{\"variants\": [\n  {\"kernel\": \"scale_tokens\",,}\n]}", "bad.json:2:"},
      {"{\"variants\": [\n  {\"kernel\": \"scale_tokens\", \"values\": {\"cols\": 1, "
       "\"num_tokens\": 1}},\n  {\"kernel\": \"no_such_kernel\", \"values\": {}}\n]}",
       "bad.json:3: field 'variants[1].kernel': unknown kernel 'no_such_kernel'"},
      {"{\"variants\": [{\"kernel\": \"scale_tokens\",\n  \"values\": {\"cols\": 1,\n"
       "  \"num_tokens\": \"lots\"}}]}",
       "bad.json:3: field 'variants[0].values.num_tokens': expected an integer"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    std::string manifest = cli.write("bad.json", c.text);
    // The good manifest first: nothing of it may be compiled either.
    std::string good = cli.write("good.json", exact_manifest("[1]"));
    ProcessResult result = cli.run({"precompile", "--manifest", good, "--manifest", manifest});
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(c.expected) != std::string::npos);
    CHECK(result.err.find("\n") == result.err.size() - 1); // one line
    CHECK_FALSE(directory_has_entries(cli.cache()));
    CHECK_FALSE(llvm::sys::fs::exists(cli.log()));
  }
}

TEST_CASE("precompile rejects bad flags with exit 2 and a hint") {
  Cli cli;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"precompile", "-j", "0"},
           {"precompile", "--arch", "compute_90"},
           {"precompile", "--manifest"},
           {"precompile", "--manifest", cli.path("missing.json"), "--bogus"}}) {
    ProcessResult result = cli.run(args);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("specjit precompile") != std::string::npos);
  }
  ProcessResult missing = cli.run({"precompile", "--manifest", cli.path("missing.json")});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("missing.json") != std::string::npos);
}
