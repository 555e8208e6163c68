// libspecjit.so exports exactly the functions specjit.h declares, under the soname
// libspecjit.so.1, and needs neither LLVM nor libcuda at run time (capi/exports.map).
#include "capi_test_support.h"

#include <regex>
#include <set>
#include <sstream>

using namespace specjit::test;

namespace {

std::set<std::string> header_functions() {
  std::string header = read_file(std::string(SPECJIT_SOURCE_DIR) + "/include/specjit/specjit.h");
  // Every declaration: SPECJIT_API <return type> specjit_name(
  std::regex declaration(R"(SPECJIT_API[^;(]*?\b(specjit_[a-z0-9_]+)\s*\()");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), declaration);
       it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

std::set<std::string> exported_functions() {
  ProcessResult nm = run_process({"/usr/bin/nm", "-D", "--defined-only", SPECJIT_SHARED_LIBRARY});
  REQUIRE_MESSAGE(nm.exit_code == 0, nm.err);
  std::set<std::string> names;
  std::istringstream lines(nm.out);
  std::string address, type, name;
  while (lines >> address >> type >> name)
    names.insert(name);
  return names;
}

} // namespace

TEST_CASE("the shared library exports exactly the header's functions") {
  std::set<std::string> declared = header_functions();
  CHECK(declared.size() == 20);
  CHECK(declared.count("specjit_kernel_launch") == 1);
  std::set<std::string> exported = exported_functions();
  for (const std::string& name : exported)
    CHECK_MESSAGE(declared.count(name) == 1, "exported but not in specjit.h: " << name);
  for (const std::string& name : declared)
    CHECK_MESSAGE(exported.count(name) == 1, "declared but not exported: " << name);
}

TEST_CASE("the shared library's soname carries the ABI version and it links no LLVM or libcuda") {
  ProcessResult dynamic = run_process({"/usr/bin/readelf", "-d", SPECJIT_SHARED_LIBRARY});
  REQUIRE(dynamic.exit_code == 0);
  CHECK(dynamic.out.find("Library soname: [libspecjit.so.1]") != std::string::npos);
  CHECK(dynamic.out.find("libLLVM") == std::string::npos);
  CHECK(dynamic.out.find("libcuda") == std::string::npos);
}
