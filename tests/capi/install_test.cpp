// The installed package as an embedding program sees it (cmake/Install.cmake, examples/):
// `cmake --install` into a prefix, the C and C++ examples built out of tree against it
// (find_package; the C one also with pkg-config), each run twice on a fresh cache: the first
// run compiles once for its 1,000 token counts, the second compiles nothing and reads the
// variant from disk (the recompilation log shows both).
#include "capi_test_support.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Program.h>

#include <regex>

using namespace specjit::test;

namespace {

// Runs a program found on PATH (run_process takes a path).
ProcessResult run_ok(std::vector<std::string> argv, const std::vector<std::string>& env = {}) {
  if (argv[0].find('/') == std::string::npos) {
    auto path = llvm::sys::findProgramByName(argv[0]);
    REQUIRE_MESSAGE(static_cast<bool>(path), argv[0] << " is not on PATH");
    argv[0] = *path;
  }
  ProcessResult result = run_process(argv, env);
  std::string command;
  for (const std::string& arg : argv)
    command += arg + " ";
  REQUIRE_MESSAGE(result.exit_code == 0, command << "\nstdout: " << result.out
                                                  << "\nstderr: " << result.err);
  return result;
}

uint64_t counter(const std::string& out, const std::string& name) {
  std::smatch match;
  REQUIRE_MESSAGE(std::regex_search(out, match, std::regex(name + "=([0-9]+)")), out);
  return std::stoull(match[1]);
}

// Runs a built example twice on one fresh cache and checks the two runs' logs and counters.
void check_two_runs(const std::string& program, const TempDir& dir) {
  const std::string cache = dir / ("cache-" + std::to_string(std::hash<std::string>()(program)));
  const std::string log = cache + "/events.jsonl";
  const std::vector<std::string> env = {"SPECJIT_CACHE_DIR=" + cache, "SPECJIT_LOG=" + log,
                                        "SPECJIT_ARCH=sm_90a", "SPECJIT_CACHE_READONLY_DIRS=",
                                        "SPECJIT_STRICT="};
  ProcessResult first = run_ok({program}, env);
  CHECK(counter(first.out, "compiles") == 1);
  CHECK(counter(first.out, "requests") == 1000);
  CHECK(events_named(read_json_lines(log), "compile", "scale_rows").size() == 1);

  ProcessResult second = run_ok({program}, env);
  CHECK(counter(second.out, "compiles") == 0);
  CHECK(counter(second.out, "disk_hits") == 1);
  // Still the one compile of the first run: the second process compiled nothing.
  std::vector<llvm::json::Object> events = read_json_lines(log);
  CHECK(events_named(events, "compile", "scale_rows").size() == 1);
  CHECK(events_named(events, "disk_hit", "scale_rows").size() >= 1);
}

void build_example(const std::string& name, const std::string& prefix, const std::string& build) {
  run_ok({"cmake", "-S", std::string(SPECJIT_SOURCE_DIR) + "/examples/" + name, "-B", build,
          "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"});
  run_ok({"cmake", "--build", build});
}

} // namespace

TEST_CASE("the C and C++ examples build against an installed prefix and compile once") {
  TempDir dir;
  const std::string prefix = dir / "prefix";
  run_ok({"cmake", "--install", SPECJIT_BINARY_DIR, "--prefix", prefix});
  for (const char* installed :
       {"/lib/libspecjit.so", "/lib/libspecjit.so.1", "/include/specjit/specjit.h",
        "/include/specjit/specjit.hpp", "/bin/specjit", "/lib/cmake/specjit/specjitConfig.cmake",
        "/lib/cmake/specjit/specjitConfigVersion.cmake", "/lib/pkgconfig/specjit.pc"})
    CHECK_MESSAGE(llvm::sys::fs::exists(prefix + installed), "not installed: " << installed);

  build_example("c", prefix, dir / "build-c");
  check_two_runs(dir / "build-c/scale_rows_c", dir);
  build_example("cpp", prefix, dir / "build-cpp");
  check_two_runs(dir / "build-cpp/scale_rows_cpp", dir);

  // The C program once more, through pkg-config (examples/c/Makefile does the same).
  const std::string pc_program = dir / "pc_scale_rows_c";
  run_ok({"sh", "-c",
          "cc -std=c11 -Wall -Wextra -pedantic -Werror " + std::string(SPECJIT_SOURCE_DIR) +
              "/examples/c/main.c $(pkg-config --cflags --libs specjit) -Wl,-rpath," + prefix +
              "/lib -o " + pc_program},
         {"PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig"});
  check_two_runs(pc_program, dir);
}
