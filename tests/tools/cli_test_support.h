// Runs the real `specjit` binary on a temporary cache root and log (tests/tools/*_test.cpp).
#pragma once

#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>

#include <set>
#include <string>
#include <vector>

namespace specjit::test {

class Cli {
public:
  std::string cache() const { return m_dir / "cache"; }
  std::string log() const { return m_dir / "events.jsonl"; }
  std::string path(const std::string& name) const { return m_dir / name; }

  // The child sees this test's cache root and log, and compiles for sm_90a whatever the host.
  ProcessResult run(const std::vector<std::string>& args,
                    const std::vector<std::string>& env = {}) const {
    std::vector<std::string> argv = {SPECJIT_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> full_env = {"SPECJIT_CACHE_DIR=" + cache(), "SPECJIT_LOG=" + log(),
                                         "SPECJIT_ARCH=sm_90a", "SPECJIT_CACHE_READONLY_DIRS="};
    full_env.insert(full_env.end(), env.begin(), env.end());
    return run_process(argv, full_env);
  }

  // Runs with --json, expects `exit_code`, and returns stdout parsed.
  llvm::json::Object json(std::vector<std::string> args, int exit_code = 0,
                          const std::vector<std::string>& env = {}) const {
    args.push_back("--json");
    ProcessResult result = run(args, env);
    INFO("stderr: " << result.err);
    REQUIRE(result.exit_code == exit_code);
    auto value = llvm::json::parse(result.out);
    REQUIRE_MESSAGE(static_cast<bool>(value), "stdout is not JSON: " << result.out);
    REQUIRE(value->getAsObject() != nullptr);
    return *value->getAsObject();
  }

  std::string write(const std::string& name, const std::string& text) const {
    write_file(path(name), text);
    return path(name);
  }

  // The keys of every entry `ls --json` lists in `root`.
  std::set<std::string> keys(const std::string& root) const {
    llvm::json::Object listing = json({"ls", "--cache-dir", root});
    std::set<std::string> keys;
    for (const llvm::json::Value& entry : *listing.getArray("entries"))
      keys.insert(entry.getAsObject()->getString("key")->str());
    return keys;
  }

  std::vector<std::string> entry_paths() const {
    llvm::json::Object listing = json({"ls"});
    std::vector<std::string> paths;
    for (const llvm::json::Value& entry : *listing.getArray("entries"))
      paths.push_back(entry.getAsObject()->getString("path")->str());
    return paths;
  }

private:
  TempDir m_dir;
};

inline int64_t field(const llvm::json::Object& object, llvm::StringRef name) {
  auto value = object.getInteger(name);
  REQUIRE_MESSAGE(value.hasValue(), "no integer field " << name.str());
  return *value;
}

// scale_tokens with num_tokens compiled in: one variant per listed value (fast compiles).
inline std::string exact_manifest(const std::string& num_tokens) {
  return R"({"version": 1, "variants": [{"kernel": "scale_tokens",
    "values": {"cols": 64, "num_tokens": )" +
         num_tokens + R"(}, "policies": {"num_tokens": "exact"}}]})";
}

inline bool directory_has_entries(const std::string& root) {
  std::error_code ec;
  llvm::sys::fs::recursive_directory_iterator it(root + "/v1/entries", ec), end;
  for (; it != end && !ec; it.increment(ec))
    if (it->type() == llvm::sys::fs::file_type::regular_file)
      return true;
  return false;
}

} // namespace specjit::test
