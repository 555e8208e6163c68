// specjit precompile, end to end through the real binary (no GPU: NVRTC only).
#include "cli_test_support.h"

#include <llvm/Support/Path.h>

#include <sys/stat.h>

#include <set>

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

namespace {
// The kernels of the entries in the CLI's cache root, each once.
std::set<std::string> cached_kernels(Cli& cli) {
  std::set<std::string> kernels;
  llvm::json::Object listing = cli.json({"ls"});
  for (const llvm::json::Value& entry : *listing.getArray("entries"))
    kernels.insert(entry.getAsObject()->getString("kernel")->str());
  return kernels;
}
} // namespace

TEST_CASE("precompile without a manifest prepares every reference model's ops, no test kernel") {
  Cli cli;
  llvm::json::Object result = cli.json({"precompile"});
  CHECK(field(result, "variants") > 40);
  CHECK(field(result, "failed") == 0);
  CHECK(field(result, "compiled") == field(result, "variants"));
  const std::set<std::string> kernels = cached_kernels(cli);
  for (const char* kernel : {"inv_rope_fp8_quant", "moe_route", "moe_align", "moe_wgmma1_fp8",
                             "moe_wgmma2_fp8", "moe_wgmma1_bf16", "moe_wgmma2_bf16", "moe_reduce"})
    CHECK_MESSAGE(kernels.count(kernel) == 1, kernel);
  CHECK(kernels.count("scale_tokens") == 0);
  // The default manifest names the H200: its tuned entries apply, and nothing warns.
  ProcessResult again = cli.run({"precompile"});
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("default rule decides") == std::string::npos);
}

TEST_CASE("precompile --model prepares one reference model; an unknown name lists them") {
  Cli cli;
  llvm::json::Object attention = cli.json({"precompile", "--model", "deepseek-v4-attention"});
  CHECK(field(attention, "variants") == 2); // the two layouts; num_tokens is dynamic
  CHECK(cached_kernels(cli) == std::set<std::string>{"inv_rope_fp8_quant"});
  llvm::json::Object both =
      cli.json({"precompile", "--model", "deepseek-v3-tp8", "--model", "deepseek-v4-attention"});
  CHECK(field(both, "reused") == 2);
  CHECK(field(both, "failed") == 0);
  ProcessResult unknown = cli.run({"precompile", "--model", "llama-3-70b"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("no reference model 'llama-3-70b'; the models are qwen3-30b-a3b, "
                         "mixtral-8x7b, deepseek-v3-tp8, deepseek-v4-attention") !=
        std::string::npos);
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

TEST_CASE("--from-log replays wgmma GEMM variants whose choices the log names") {
  Cli cli;
  // Qwen3's FP8 layer at T = 1: swap-AB wgmma GEMMs, logged with their orientation, schedule and
  // weights' reads by name.
  std::string manifest = cli.write("m.json", R"({"models": [{"type": "moe", "experts": 128,
      "top_k": 8, "hidden": 2048, "intermediate": 768, "dtype": "fp8", "num_tokens": [1]}]})");
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  const std::string log = read_file(cli.log());
  CHECK(log.find("\"orientation\":\"swap_ab\"") != std::string::npos);
  CHECK(log.find("\"weights\":\"row_major_map\"") != std::string::npos);
  std::string fresh = cli.path("fresh");
  llvm::json::Object replay =
      cli.json({"precompile", "--from-log", cli.log(), "--cache-dir", fresh}, 0,
               {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(field(replay, "skipped_events") == 0);
  CHECK(field(replay, "failed") == 0);
  CHECK(field(replay, "compiled") == field(replay, "variants"));
  CHECK(cli.keys(fresh) == cli.keys(cli.cache()));
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

TEST_CASE("--from-log skips, counts and names events of kernels it cannot rebuild") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("m.json", exact_manifest("[1, 2]"))})
              .exit_code == 0);
  // An application's own kernels, which this build does not know, between the known ones.
  std::string log = read_file(cli.log());
  std::string foreign = R"({"v":1,"event":"compile","kernel":"app_kernel","variant":{"n":4},)"
                        R"("key":"k1","ms":3,"arch":"sm_90a"})"
                        "\n";
  std::string changed = R"({"v":1,"event":"disk_hit","kernel":"scale_tokens",)"
                        R"("variant":{"cols":64},"key":"k2","ms":1})"
                        "\n";
  std::string extra = R"({"v":1,"event":"disk_hit","kernel":"scale_tokens",)"
                      R"("variant":{"cols":64,"num_tokens":"dynamic","rows":2},"key":"k3","ms":1})"
                      "\n";
  write_file(cli.path("mixed.jsonl"), foreign + log + foreign + changed + extra);
  std::string fresh = cli.path("fresh");
  llvm::json::Object replay = cli.json({"precompile", "--from-log", cli.path("mixed.jsonl"),
                                        "--cache-dir", fresh},
                                       0, {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(field(replay, "compiled") == 2);
  CHECK(field(replay, "skipped_events") == 4);
  const llvm::json::Array* skipped = replay.getArray("skipped");
  REQUIRE(skipped != nullptr);
  REQUIRE(skipped->size() == 3);
  const llvm::json::Object& app = *(*skipped)[0].getAsObject();
  CHECK(app.getString("kernel")->str() == "app_kernel");
  CHECK(*app.getInteger("events") == 2);
  CHECK(app.getString("reason")->str() ==
        "not a kernel this build knows nor one a --manifest defines");
  CHECK(app.getString("first")->str() == cli.path("mixed.jsonl") + ":1");
  const llvm::json::Object& lacking = *(*skipped)[1].getAsObject();
  CHECK(lacking.getString("reason")->str().find("lacks parameter 'num_tokens'") !=
        std::string::npos);
  const llvm::json::Object& more = *(*skipped)[2].getAsObject();
  CHECK(more.getString("reason")->str() ==
        "the logged variant has parameter 'rows', which the definition lacks");
  CHECK(cli.keys(fresh) == cli.keys(cli.cache()));
  // The text summary names them too.
  ProcessResult text = cli.run({"precompile", "--from-log", cli.path("mixed.jsonl")});
  CHECK(text.exit_code == 0);
  CHECK(text.err.find("skipped 2 log events of kernel 'app_kernel'") != std::string::npos);
}

TEST_CASE("SPECJIT_STRICT=error does not stop precompile") {
  Cli cli;
  llvm::json::Object result =
      cli.json({"precompile", "--manifest", cli.write("m.json", exact_manifest("[3]"))}, 0,
               {"SPECJIT_STRICT=error"});
  CHECK(field(result, "compiled") == 1);
  CHECK(field(result, "failed") == 0);
  CHECK(directory_has_entries(cli.cache()));
}

TEST_CASE("precompile exits 1 and says why when compiled variants were not saved") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2]"));
  // A refused root (world-writable): compiled, nothing saved.
  llvm::sys::fs::create_directories(cli.cache());
  REQUIRE(chmod(cli.cache().c_str(), 0777) == 0);
  llvm::json::Object refused = cli.json({"precompile", "--manifest", manifest}, 1);
  CHECK(field(refused, "compiled") == 0);
  CHECK(field(refused, "not_saved") == 2);
  const llvm::json::Array* unsaved = refused.getArray("unsaved");
  REQUIRE(unsaved != nullptr);
  REQUIRE(unsaved->size() == 2);
  CHECK((*unsaved)[0].getAsObject()->getString("reason")->str().find("cannot be written") !=
        std::string::npos);
  ProcessResult text = cli.run({"precompile", "--manifest", manifest});
  CHECK(text.exit_code == 1);
  CHECK(text.out.find("2 not saved") != std::string::npos);
  CHECK(text.err.find("2 compiled variants were not saved: the cache cannot be written") !=
        std::string::npos);
  // A file where the kernel's directory goes is moved aside and the directory made (the cache
  // repairs what is in the way, reliability test T7): everything is saved.
  REQUIRE(chmod(cli.cache().c_str(), 0755) == 0);
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  std::vector<std::string> entries = cli.entry_paths();
  REQUIRE_FALSE(entries.empty());
  std::string kernel_dir = llvm::sys::path::parent_path(entries.front()).str();
  REQUIRE(cli.run({"clear"}).exit_code == 0);
  llvm::sys::fs::remove_directories(kernel_dir);
  write_file(kernel_dir, "in the way");
  llvm::json::Object repaired = cli.json({"precompile", "--manifest", manifest}, 0);
  CHECK(field(repaired, "not_saved") == 0);
  CHECK(field(repaired, "compiled") == 2);
}

TEST_CASE("-j out of range is a usage error naming the range") {
  Cli cli;
  ProcessResult result = cli.run({"precompile", "-j", "99999999999"});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("-j: '99999999999' is out of range; expected an integer in [1, 1024]") !=
        std::string::npos);
}
