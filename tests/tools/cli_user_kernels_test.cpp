// specjit precompile, log and why with kernels a manifest defines (tests/tools/data/app_kernels:
// a source file, an include directory, a define and an option), through the real binary.
#include "cli_test_support.h"
#include "engine_fixture.h"

#include "runtime/engine.h"

#include <llvm/Support/FileSystem.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace specjit;
using namespace specjit::test;

namespace {

const std::string k_data = std::string(SPECJIT_SOURCE_DIR) + "/tests/tools/data/app_kernels";
const std::string k_manifest = k_data + "/manifest.json";

// The definition manifest.json gives, as a serving process writes it with the C++ API.
runtime::KernelDef app_scale_at_run_time() {
  runtime::KernelDef def;
  def.id = "app_scale";
  def.source = runtime::KernelSource::from_file(k_data + "/kernels/app_scale.cu");
  def.function = "app_scale";
  def.params = {runtime::ParamDef::user("num_tokens", runtime::Policy::dynamic()),
                runtime::ParamDef::user("block", runtime::Policy::exact())};
  def.include_dirs = {k_data + "/include"};
  def.defines = {"APP_SCALE=1.5f"};
  def.options = {"--use_fast_math"};
  return def;
}

// A manifest defining app_scale by absolute paths (so it may live anywhere), with `rest` after
// its "kernels" list.
std::string app_kernels_manifest(const std::string& rest = "") {
  return R"({"kernels": [{"id": "app_scale", "source": ")" + k_data +
         R"(/kernels/app_scale.cu", "function": "app_scale", "include_dirs": [")" + k_data +
         R"(/include"], "defines": {"APP_SCALE": "1.5f"}, "options": ["--use_fast_math"],
    "params": [{"name": "num_tokens"}, {"name": "block", "policy": "exact"}]}])" +
         rest + "}";
}

const llvm::json::Object& kernel_row(const llvm::json::Object& log, const std::string& kernel) {
  for (const llvm::json::Value& row : *log.getArray("kernels"))
    if (row.getAsObject()->getString("kernel")->str() == kernel)
      return *row.getAsObject();
  FAIL("no row for kernel " << kernel);
  return log;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE(
    "a manifest kernel with an include dir and a list of dynamic token counts compiles once") {
  Cli cli;
  llvm::json::Object first = cli.json({"precompile", "--manifest", k_manifest});
  CHECK(field(first, "variants") == 1);
  CHECK(field(first, "compiled") == 1);
  CHECK(field(first, "failed") == 0);
  // A second process finds it on disk (through the header list of direct mode): no compile.
  llvm::json::Object second = cli.json({"precompile", "--manifest", k_manifest});
  CHECK(field(second, "compiled") == 0);
  CHECK(field(second, "reused") == 1);
  const llvm::json::Object log = cli.json({"log", "--kernel", "app_scale"});
  const llvm::json::Object& row = kernel_row(log, "app_scale");
  CHECK(field(row, "compiles") == 1);
  CHECK(field(row, "disk_hits") == 1);
  CHECK(field(row, "variants") == 1);
}

TEST_CASE("a run-time definition of the kernel after precompile is a disk hit") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", k_manifest}).exit_code == 0);
  runtime::Engine engine(make_config({{"SPECJIT_CACHE_DIR", cli.cache()},
                                      {"SPECJIT_LOG", cli.path("serving.jsonl")},
                                      {"SPECJIT_ARCH", "sm_90a"}}));
  auto id = engine.add_kernel(app_scale_at_run_time());
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  for (int64_t tokens : {3, 4096}) {
    auto variant = engine.prepare(*id, {tokens, 128});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    CHECK((*variant)->source != runtime::VariantSource::compiled);
  }
  CHECK(engine.stats().compiles == 0);
  CHECK(engine.stats().disk_hits == 1);
}

TEST_CASE("log and why show a manifest kernel like a built-in one") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", k_manifest}).exit_code == 0);
  std::string wider = cli.write("wider.json", app_kernels_manifest(R"(, "variants": [
    {"kernel": "app_scale", "values": {"num_tokens": 1, "block": [128, 256]}}])"));
  llvm::json::Object run = cli.json({"precompile", "--manifest", wider});
  CHECK(field(run, "compiled") == 1);
  CHECK(field(run, "reused") == 1);
  ProcessResult log = cli.run({"log"});
  CHECK(log.exit_code == 0);
  CHECK(contains(log.out, "app_scale"));
  CHECK(contains(log.out, "app_scale {block=256, num_tokens=dynamic}"));
  CHECK(field(kernel_row(cli.json({"log"}), "app_scale"), "compiles") == 2);
  ProcessResult why = cli.run({"why", "app_scale", "--variant", "block=256"});
  INFO(why.out << why.err);
  CHECK(why.exit_code == 0);
  CHECK(contains(why.out, "compiled app_scale {block=256, num_tokens=dynamic}"));
  CHECK(contains(why.out, "(new_variant, warmup)"));
  CHECK(contains(why.out, "block: 256 is a new value under policy exact; 1 other value cached"));
  llvm::json::Object json = cli.json({"why", "app_scale", "--last", "1"});
  CHECK(field(json, "cached_entries") == 2);
}

TEST_CASE("--from-log replays a manifest kernel when its manifest is given, else names it") {
  Cli cli;
  std::string both = cli.write("both.json", app_kernels_manifest(R"(, "variants": [
    {"kernel": "app_scale", "values": {"num_tokens": 1, "block": [64, 128]}}])"));
  REQUIRE(cli.run({"precompile", "--manifest", both}).exit_code == 0);
  // A manifest that only defines the kernel: the log says which variants to prepare.
  std::string definitions = cli.write("kernels.json", app_kernels_manifest());
  std::string fresh = cli.path("fresh");
  llvm::json::Object replay = cli.json(
      {"precompile", "--from-log", cli.log(), "--manifest", definitions, "--cache-dir", fresh}, 0,
      {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(field(replay, "variants") == 2);
  CHECK(field(replay, "compiled") == 2);
  CHECK(field(replay, "skipped_events") == 0);
  CHECK(cli.keys(fresh) == cli.keys(cli.cache()));

  std::string bare = cli.path("bare");
  llvm::json::Object skipped =
      cli.json({"precompile", "--from-log", cli.log(), "--cache-dir", bare}, 0,
               {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(field(skipped, "variants") == 0);
  CHECK(field(skipped, "skipped_events") == 2);
  const llvm::json::Object& row = *(*skipped.getArray("skipped"))[0].getAsObject();
  CHECK(row.getString("kernel")->str() == "app_scale");
  CHECK(row.getString("reason")->str() ==
        "not a kernel this build knows nor one a --manifest defines");
  ProcessResult text = cli.run({"precompile", "--from-log", cli.log(), "--cache-dir", bare},
                               {"SPECJIT_LOG=" + cli.path("replay.jsonl")});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.err, "skipped 2 log events of kernel 'app_scale'"));
  CHECK_FALSE(directory_has_entries(bare));
}

TEST_CASE("a bad kernels entry names the field, exits 2 and leaves the cache empty") {
  Cli cli;
  std::string entry = R"({"id": "app_scale", "function": "app_scale",
    "params": [{"name": "num_tokens"}, {"name": "block", "policy": "exact"}],
    "source": ")" + k_data +
                      "/kernels/app_scale.cu\"";
  struct Case {
    std::string text;
    std::string expected;
  };
  std::vector<Case> cases = {
      {R"({"kernels": [{"id": "app_scale", "function": "app_scale", "source": "nope.cu"}]})",
       "bad.json:1: field 'kernels[0].source': kernel app_scale: cannot read kernel source " +
           cli.path("nope.cu") + ": No such file or directory"},
      {"{\"kernels\": [\n" + entry + ", \"include_dirs\": [\"include\"]}]}",
       "bad.json:4: field 'kernels[0].include_dirs[0]': kernel app_scale: include directory '" +
           cli.path("include") + "' is not usable: No such file or directory"},
      {"{\"kernels\": [\n" + entry + ", \"include_dirs\": [\"bad.json\"]}]}",
       "include directory '" + cli.path("bad.json") + "' is not a directory"},
      {R"j({"kernels": [{"id": "app_scale", "function": "app_scale", "source": "x.cu",
    "params": [{"name": "block", "policy": "exact(4)"}]}]})j",
       "bad.json:2: field 'kernels[0].params[0].policy': 'exact(4)' is not a policy"},
      {"{\"kernels\": [" + entry +
           "}],\n \"variants\": [{\"kernel\": \"app_scal\", \"values\": {}}]}",
       "bad.json:4: field 'variants[0].kernel': unknown kernel 'app_scal'"},
      {"{\"kernels\": [" + entry + "},\n" + entry + "}]}",
       "field 'kernels[1].id': kernel 'app_scale' is already defined at " + cli.path("bad.json") +
           ":1"},
      {R"({"kernels": [{"id": "inv_rope_fp8_quant", "function": "f", "source": "x.cu"}]})",
       "field 'kernels[0].id': 'inv_rope_fp8_quant' is a kernel specjit ships"},
  };
  if (::geteuid() != 0) {
    REQUIRE(!llvm::sys::fs::create_directories(cli.path("locked")));
    REQUIRE(::chmod(cli.path("locked").c_str(), 0100) == 0);
    cases.push_back({"{\"kernels\": [\n" + entry + ", \"include_dirs\": [\"locked\"]}]}",
                     "include directory '" + cli.path("locked") + "' cannot be read"});
  } else {
    MESSAGE("running as root, which reads a folder of mode 0100: the unreadable include "
            "directory case is left out");
  }
  for (const Case& c : cases) {
    INFO(c.text);
    std::string manifest = cli.write("bad.json", c.text);
    ProcessResult result =
        cli.run({"precompile", "--manifest", k_manifest, "--manifest", manifest});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, c.expected));
    CHECK(result.err.find("\n") == result.err.size() - 1); // one line
    CHECK_FALSE(directory_has_entries(cli.cache()));
    CHECK_FALSE(llvm::sys::fs::exists(cli.log()));
  }
  // Two manifests may define one id only alike.
  std::string other = cli.write(
      "other.json", app_kernels_manifest().replace(app_kernels_manifest().find("1.5f"), 4, "2.5f"));
  ProcessResult differ = cli.run({"precompile", "--manifest", k_manifest, "--manifest", other});
  CHECK(differ.exit_code == 2);
  CHECK(
      contains(differ.err, other + ": kernel 'app_scale' is defined differently in " + k_manifest));
  CHECK_FALSE(directory_has_entries(cli.cache()));
}

TEST_CASE("a kernel that does not compile fails its variants, exits 1 and writes no entry") {
  Cli cli;
  cli.write("broken.cu", "template <int BLOCK> __global__ void app_scale(\n"
                         "    float* x) { x[0] = undeclared_name; }\n");
  cli.write("needs_header.cu", "#include \"app/missing.h\"\n"
                               "template <int BLOCK> __global__ void app_scale(float* x) {}\n");
  struct Case {
    std::string source;
    std::string params;
    std::vector<std::string> expected;
  };
  const std::string two = R"([{"name": "num_tokens"}, {"name": "block", "policy": "exact"}])";
  const Case cases[] = {
      {"broken.cu", two, {"broken.cu(2)", "undeclared_name", "--use_fast_math"}},
      {"needs_header.cu", two, {"needs_header.cu(1)", "cannot open source file \"app/missing.h\""}},
      {k_data + "/kernels/app_scale.cu",
       R"([{"name": "num_tokens"}, {"name": "block", "policy": "exact"},
          {"name": "extra", "policy": "exact"}])",
       {"app_scale<128, 3>", "num_tokens (dynamic, not a template parameter)", "block (exact)",
        "extra (exact)"}},
  };
  for (const Case& c : cases) {
    INFO(c.source);
    std::string values = c.params.find("extra") != std::string::npos
                             ? R"({"num_tokens": 1, "block": 128, "extra": 3})"
                             : R"({"num_tokens": 1, "block": 128})";
    std::string manifest = cli.write(
        "m.json", R"({"kernels": [{"id": "app_scale", "function": "app_scale", "source": ")" +
                      c.source + R"(", "include_dirs": [")" + k_data +
                      R"(/include"], "options": ["--use_fast_math"], "params": )" + c.params +
                      R"(}], "variants": [{"kernel": "app_scale", "values": )" + values + "}]}");
    llvm::json::Object result = cli.json({"precompile", "--manifest", manifest}, 1);
    CHECK(field(result, "failed") == 1);
    const llvm::json::Array* failures = result.getArray("failures");
    REQUIRE(failures != nullptr);
    REQUIRE(failures->size() == 1);
    std::string error = (*failures)[0].getAsObject()->getString("error")->str();
    for (const std::string& part : c.expected)
      CHECK_MESSAGE(contains(error, part), error);
    ProcessResult text = cli.run({"precompile", "--manifest", manifest});
    CHECK(text.exit_code == 1);
    CHECK(contains(text.err, "failed: app_scale"));
    CHECK_FALSE(directory_has_entries(cli.cache()));
  }
}
