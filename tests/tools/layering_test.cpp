// The architecture's rules, checked on the tree and the binaries: dependencies point one way
// (tools -> runtime -> {jit, cache} -> support), only support/ reads the environment, only
// runtime/ touches the driver, and nothing links libcuda (it is dlopen'ed at first use).
#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <regex>

namespace {

std::vector<std::string> sources_under(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  std::string root = std::string(SPECJIT_SOURCE_DIR) + "/" + folder;
  for (llvm::sys::fs::recursive_directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef path(it->path());
    if (path.endswith(".cpp") || path.endswith(".h"))
      files.push_back(it->path());
  }
  return files;
}

// Lines of `folder`'s sources that match `pattern`.
std::vector<std::string> matches(const std::string& folder, const std::string& pattern) {
  std::regex re(pattern);
  std::vector<std::string> found;
  for (const std::string& file : sources_under(folder)) {
    std::string text = specjit::test::read_file(file);
    size_t line_start = 0;
    for (size_t pos = 0; pos <= text.size(); ++pos) {
      if (pos < text.size() && text[pos] != '\n')
        continue;
      std::string line = text.substr(line_start, pos - line_start);
      if (std::regex_search(line, re))
        found.push_back(file + ": " + line);
      line_start = pos + 1;
    }
  }
  return found;
}

void check_none(const std::vector<std::string>& found, const char* rule) {
  for (const std::string& line : found)
    FAIL_CHECK(std::string(rule) << ": " << line);
  CHECK(found.empty());
}

} // namespace

TEST_CASE("only support/ reads the environment") {
  for (const char* folder : {"jit", "cache", "runtime", "tools"})
    check_none(matches(folder, R"(\bgetenv\s*\()"), "getenv outside support/");
}

TEST_CASE("jit/ and cache/ never include each other, nor anything above them") {
  check_none(matches("jit", R"(#include\s+"(cache|runtime|tools)/)"), "jit/ includes upward");
  check_none(matches("cache", R"(#include\s+"(jit|runtime|tools)/)"), "cache/ includes upward");
  check_none(matches("support", R"(#include\s+"(jit|cache|runtime|tools)/)"),
             "support/ includes upward");
  check_none(matches("runtime", R"(#include\s+"tools/)"), "runtime/ includes tools/");
}

TEST_CASE("only runtime/ uses the CUDA driver API") {
  for (const char* folder : {"support", "jit", "cache"})
    check_none(matches(folder, R"(#include\s+<cuda\.h>)"), "cuda.h outside runtime/");
}

TEST_CASE("no binary links libcuda") {
  for (const char* binary : {SPECJIT_CLI, SPECJIT_TEST_HELPER}) {
    specjit::test::ProcessResult ldd = specjit::test::run_process({"/usr/bin/ldd", binary});
    REQUIRE_MESSAGE(ldd.exit_code == 0, ldd.err);
    CHECK(ldd.out.find("libnvrtc") != std::string::npos); // NVRTC is linked, as it should be
    CHECK_MESSAGE(ldd.out.find("libcuda.") == std::string::npos, ldd.out);
  }
}
