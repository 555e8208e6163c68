// Helpers shared by the test binaries: temporary directories, child processes, the
// recompilation log as JSON, and the visible GPU skip.
#pragma once

#include <llvm/Support/JSON.h>

#include <functional>
#include <string>
#include <vector>

namespace specjit::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return m_path; }
  std::string operator/(const std::string& name) const { return m_path + "/" + name; }

private:
  std::string m_path;
};

struct ProcessResult {
  int exit_code = -1; // -1: killed by a signal (signal_number says which)
  int signal_number = 0;
  std::string out;
  std::string err;
};

// Runs argv[0] with arguments, environment = the current one plus `env` ("NAME=value"; a
// "NAME=" entry with no value unsets NAME). Captures stdout and stderr.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {},
                          const std::string& stdin_text = "");

// Every line of a JSON Lines file, parsed; lines that do not parse fail the calling test.
std::vector<llvm::json::Object> read_json_lines(const std::string& path);
// The events of a log with event == name (and, when non-empty, kernel == kernel).
std::vector<llvm::json::Object> events_named(const std::vector<llvm::json::Object>& events,
                                             const std::string& name,
                                             const std::string& kernel = "");

// A field of a JSON object, or a value no test expects (INT64_MIN, "<missing>") when absent.
int64_t int_field(const llvm::json::Object& object, llvm::StringRef name);
std::string string_field(const llvm::json::Object& object, llvm::StringRef name);

// Runs `body` in a forked child with a private mount namespace, so that mounts made there are
// invisible to every other process and vanish with the child (children it starts inherit it).
// Returns the body's exit code, or k_no_mount_namespace when this machine does not allow it.
inline constexpr int k_no_mount_namespace = 77;
int in_private_mount_namespace(const std::function<int()>& body);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// True when a CUDA device is usable. When false, prints
//   "[gpu] SKIPPED <test>: <reason>"
// Defined in gpu_skip.cpp (linked into the binaries that use the runtime).
bool gpu_or_skip(const char* test_name);

} // namespace specjit::test
