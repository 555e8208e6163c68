// The architecture's rules, checked on the tree and the binaries. Dependencies point one way:
//   support <- jit, cache <- runtime <- ops <- deploy <- capi, python, tools
// jit and cache never include each other; ops/moe and ops/inv_rope not each other, both use
// ops/common; only tools and tests include tools/; the Python binding uses the C ABI alone.
// Only support/ reads the environment, only runtime/ and above touch the driver, and nothing
// links libcuda (it is dlopen'ed at first use). The build enforces the include rules too (each
// target sees only the folders it links: cmake/Layers.cmake; the layering/ ctests); this test
// names every offending line at once, including in files no target compiles.
#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

// C++ sources and headers; with_c, C sources too (tools/launch_probe: the C ABI's test client
// and a stand-in libcuda, which reads its own environment).
std::vector<std::string> sources_under(const std::string& folder, bool with_c = true) {
  std::vector<std::string> files;
  std::error_code ec;
  std::string root = std::string(SPECJIT_SOURCE_DIR) + "/" + folder;
  for (llvm::sys::fs::recursive_directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef path(it->path());
    if (path.endswith(".cpp") || path.endswith(".h") || (with_c && path.endswith(".c")))
      files.push_back(it->path());
  }
  return files;
}

// Lines of `folder`'s sources that match `pattern`, as "file: line", with the pattern's
// capture group `group` of each.
struct Match {
  std::string where; // "file: line"
  std::string captured;
};
std::vector<Match> matches(const std::string& folder, const std::string& pattern, int group = 0,
                           bool with_c = true) {
  std::regex re(pattern);
  std::vector<Match> found;
  for (const std::string& file : sources_under(folder, with_c)) {
    std::string text = specjit::test::read_file(file);
    size_t line_start = 0;
    for (size_t pos = 0; pos <= text.size(); ++pos) {
      if (pos < text.size() && text[pos] != '\n')
        continue;
      std::string line = text.substr(line_start, pos - line_start);
      std::smatch m;
      if (std::regex_search(line, m, re))
        found.push_back({file + ": " + line, m[group].str()});
      line_start = pos + 1;
    }
  }
  return found;
}

void check_none(const std::vector<Match>& found, const char* rule) {
  for (const Match& match : found)
    FAIL_CHECK(std::string(rule) << ": " << match.where);
  CHECK(found.empty());
}

// The project's folders that includes name ("runtime/engine.h" -> runtime; the ops are one
// unit per op folder, "ops/moe/plan.h" -> ops/moe); specjit/ is the installed C ABI and C++
// wrapper (include/specjit/). Anything else is a path relative to the includer or to a folder
// its target adds itself (tools' "cli.h", the tests' "reference/..."), and is not ruled here.
const std::set<std::string>& units() {
  static const std::set<std::string> all = {
      "support", "jit",     "cache", "runtime", "ops/common", "ops/moe",
      "ops/inv_rope", "deploy", "capi", "tools", "kernels_src", "examples", "specjit"};
  return all;
}

std::string unit_of(llvm::StringRef include) {
  auto [first, rest] = include.split('/');
  if (rest.empty())
    return "";
  if (first == "ops")
    return ("ops/" + rest.split('/').first).str();
  return first.str();
}

// What each folder's sources may include, by unit. A folder's tests (tests/<folder>) follow
// the same rule, as their binary links that layer alone.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> rules = [] {
    const std::set<std::string> engine = {"support", "jit", "cache", "runtime"};
    auto with = [](std::set<std::string> base, std::initializer_list<const char*> more) {
      base.insert(more.begin(), more.end());
      return base;
    };
    std::set<std::string> ops = with(engine, {"ops/common", "ops/moe", "ops/inv_rope",
                                              "kernels_src"});
    std::set<std::string> deploy = with(ops, {"deploy"});
    std::map<std::string, std::set<std::string>> r;
    r["support"] = {"support"};
    r["jit"] = {"support", "jit"};
    r["cache"] = {"support", "cache"};
    r["runtime"] = engine;
    r["ops/common"] = with(engine, {"ops/common"});
    r["ops/moe"] = with(engine, {"ops/common", "ops/moe", "kernels_src"});
    r["ops/inv_rope"] = with(engine, {"ops/common", "ops/inv_rope", "kernels_src"});
    r["deploy"] = deploy;
    r["capi"] = with(deploy, {"capi", "specjit"});
    r["python"] = {"specjit"};
    r["tools"] = with(deploy, {"capi", "specjit", "tools", "examples"});
    return r;
  }();
  return rules;
}

void check_includes(const std::string& folder, const std::set<std::string>& permitted) {
  std::vector<Match> bad;
  for (Match& match : matches(folder, R"re(^\s*#\s*include\s+"([^"]+)")re", 1)) {
    const std::string unit = unit_of(match.captured);
    if (units().count(unit) != 0 && permitted.count(unit) == 0)
      bad.push_back(std::move(match));
  }
  check_none(bad, ("an include " + folder + "/ may not use").c_str());
}

} // namespace

TEST_CASE("every folder includes only the layers below it and its own") {
  for (const auto& [folder, permitted] : allowed()) {
    INFO(folder);
    REQUIRE_MESSAGE(llvm::sys::fs::is_directory(std::string(SPECJIT_SOURCE_DIR) + "/" + folder),
                    folder << " is no folder of the tree: the rule is stale");
    check_includes(folder, permitted);
  }
}

TEST_CASE("every folder of C++ sources has a rule") {
  // Not layers: the tests, the kernels (NVRTC's), the examples (built against the installed
  // package), the installed headers, the build's outputs.
  const std::set<std::string> exempt = {"tests", "kernels_src", "examples", "include", "docs",
                                        "cmake"};
  auto folders_in = [](const std::string& parent) {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(std::string(SPECJIT_SOURCE_DIR) + "/" + parent, ec),
         end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::fs::is_directory(it->path()))
        names.push_back(llvm::sys::path::filename(it->path()).str());
    return names;
  };
  for (const std::string& name : folders_in("")) {
    if (name[0] == '.' || llvm::StringRef(name).startswith("build") || exempt.count(name) != 0 ||
        sources_under(name).empty())
      continue;
    if (name == "ops") {
      for (const std::string& op : folders_in("ops"))
        CHECK_MESSAGE(allowed().count("ops/" + op) == 1, "ops/" << op << " has no rule");
      continue;
    }
    CHECK_MESSAGE(allowed().count(name) == 1, name << "/ has no rule");
  }
}

TEST_CASE("each layer's tests include only that layer and the layers below it") {
  for (const char* folder : {"support", "jit", "cache", "runtime", "ops/moe", "ops/inv_rope",
                             "deploy"}) {
    INFO("tests/" << folder);
    check_includes(std::string("tests/") + folder, allowed().at(folder));
  }
}

TEST_CASE("the library's sources never climb out of their folder with ../") {
  for (const char* folder : {"support", "jit", "cache", "runtime", "ops", "deploy", "capi",
                             "python", "tools"})
    check_none(matches(folder, R"(^\s*#\s*include\s+"\.\./)"), "an include through ../");
}

TEST_CASE("only support/ reads the environment") {
  for (const char* folder : {"jit", "cache", "runtime", "ops", "deploy", "capi", "tools"})
    check_none(matches(folder, R"(\bgetenv\s*\()", 0, false), "getenv outside support/");
}

TEST_CASE("only runtime/ and the layers above it use the CUDA driver API") {
  for (const char* folder : {"support", "jit", "cache"})
    check_none(matches(folder, R"(#include\s+<cuda\.h>)"), "cuda.h below runtime/");
}

TEST_CASE("no binary links libcuda") {
  for (const char* binary : {SPECJIT_CLI, SPECJIT_TEST_HELPER}) {
    specjit::test::ProcessResult ldd = specjit::test::run_process({"/usr/bin/ldd", binary});
    REQUIRE_MESSAGE(ldd.exit_code == 0, ldd.err);
    CHECK(ldd.out.find("libnvrtc") != std::string::npos); // NVRTC is linked, as it should be
    CHECK_MESSAGE(ldd.out.find("libcuda.") == std::string::npos, ldd.out);
  }
}
