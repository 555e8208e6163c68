// specjit log and why over the log that real precompile runs write.
#include "cli_test_support.h"

using namespace specjit::test;

TEST_CASE("log --json counts compiles and disk hits per kernel") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3]"));
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0); // a new process: disk
  llvm::json::Object log = cli.json({"log"});
  REQUIRE(log.getArray("kernels")->size() == 1);
  const llvm::json::Object& kernel = *(*log.getArray("kernels"))[0].getAsObject();
  CHECK(kernel.getString("kernel")->str() == "scale_tokens");
  CHECK(field(kernel, "compiles") == 3);
  CHECK(field(kernel, "disk_hits") == 3);
  CHECK(field(kernel, "variants") == 3);
  CHECK(field(kernel, "serving_compiles") == 0);
  CHECK(*kernel.getNumber("compile_seconds") > 0);
  CHECK(kernel.getArray("storms")->empty());
  CHECK(log.getArray("slowest")->size() == 3);
  CHECK(field(log, "bad_lines") == 0);

  ProcessResult text = cli.run({"log"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("scale_tokens") != std::string::npos);
  CHECK(text.out.find("slowest compiles") != std::string::npos);
  CHECK(text.out.find("timeline") != std::string::npos);
}

TEST_CASE("log filters by kernel and time and tolerates bad lines") {
  Cli cli;
  REQUIRE(
      cli.run({"precompile", "--manifest", cli.write("m.json", exact_manifest("[1]"))}).exit_code ==
      0);
  write_file(cli.log(), read_file(cli.log()) + "{\"half a line\n");
  llvm::json::Object all = cli.json({"log"});
  CHECK(field(all, "bad_lines") == 1);
  CHECK(field(all, "events") == 1);
  CHECK(cli.json({"log", "--kernel", "other"}).getArray("kernels")->empty());
  CHECK(field(cli.json({"log", "--since", "2999-01-01T00:00:00Z"}), "events") == 0);
  CHECK(field(cli.json({"log", "--since", "1h"}), "events") == 1);
  CHECK(cli.run({"log", "--since", "last tuesday"}).exit_code == 2);
  CHECK(cli.run({"log", "--file", cli.path("missing.jsonl")}).exit_code == 1);
  CHECK(field(cli.json({"log", "--file", cli.log()}), "events") == 1);
}

TEST_CASE("why explains a compile caused by a new exact value") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("a.json", exact_manifest("[1, 2]"))})
              .exit_code == 0);
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("b.json", exact_manifest("[62]"))})
              .exit_code == 0);
  ProcessResult result = cli.run({"why", "scale_tokens", "--variant", "num_tokens=62"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(
      result.out.find("num_tokens: 62 is a new value under policy exact; 2 other values cached") !=
      std::string::npos);
  llvm::json::Object json = cli.json({"why", "scale_tokens", "--last", "1"});
  REQUIRE(json.getArray("compiles")->size() == 1);
  const llvm::json::Object& compile = *(*json.getArray("compiles"))[0].getAsObject();
  CHECK(compile.getString("reason")->str() == "new_variant");
  REQUIRE(!compile.getArray("components")->empty());
  const llvm::json::Object& component = *(*compile.getArray("components"))[0].getAsObject();
  CHECK(component.getString("component")->str() == "num_tokens");
  CHECK(component.getString("requested")->str() == "62");
  CHECK(field(component, "other_cached_values") == 2);

  CHECK(cli.run({"why", "scale_tokens", "--variant", "num_tokens=99"}).exit_code == 1);
  CHECK(cli.run({"why", "no_such_kernel"}).exit_code == 1);
  CHECK(cli.run({"why"}).exit_code == 2);
  CHECK(cli.run({"why", "scale_tokens", "--variant", "oops"}).exit_code == 2);
}

TEST_CASE("log and why read the rotated files too, oldest first") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("a.json", exact_manifest("[1, 2]"))})
              .exit_code == 0);
  // What a rotation leaves: the older events under events.1.jsonl.
  std::string rotated = cli.path("events.1.jsonl");
  REQUIRE(!llvm::sys::fs::rename(cli.log(), rotated));
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("b.json", exact_manifest("[3]"))})
              .exit_code == 0);
  llvm::json::Object log = cli.json({"log"});
  CHECK(field(log, "events") == 3);
  REQUIRE(log.getArray("files")->size() == 2);
  CHECK((*log.getArray("files"))[0].getAsString()->str() == rotated);
  llvm::json::Object why = cli.json({"why", "scale_tokens", "--last", "3"});
  const llvm::json::Array& compiles = *why.getArray("compiles");
  REQUIRE(compiles.size() == 3);
  // In log order: the rotated file's compiles first, the live file's last.
  CHECK(llvm::json::Value(*compiles[2].getAsObject()->getObject("variant")->get("num_tokens")) ==
        llvm::json::Value(3));
  ProcessResult bad = cli.run({"why", "scale_tokens", "--last", "99999999999999999999"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--last: '99999999999999999999' is out of range") != std::string::npos);
}
