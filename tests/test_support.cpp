#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace specjit::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/specjit-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  REQUIRE(mkdtemp(buffer.data()) != nullptr);
  m_path = buffer.data();
}

TempDir::~TempDir() {
  // Tests may leave read-only directories behind; make everything writable, then remove.
  std::string command = "chmod -R u+rwx '" + m_path + "' 2>/dev/null; rm -rf '" + m_path + "'";
  [[maybe_unused]] int rc = std::system(command.c_str());
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& stdin_text) {
  // Outputs go to temporary files: no pipe can fill up and deadlock the child.
  TempDir scratch;
  std::string out_path = scratch / "out", err_path = scratch / "err", in_path = scratch / "in";
  write_file(in_path, stdin_text);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const std::string& entry : env) {
      size_t eq = entry.find('=');
      std::string name = entry.substr(0, eq);
      if (eq == std::string::npos || eq + 1 == entry.size())
        unsetenv(name.c_str());
      else
        setenv(name.c_str(), entry.substr(eq + 1).c_str(), 1);
    }
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  ProcessResult result;
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.signal_number = WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

int64_t int_field(const llvm::json::Object& object, llvm::StringRef name) {
  auto value = object.getInteger(name);
  return value ? *value : INT64_MIN;
}

std::string string_field(const llvm::json::Object& object, llvm::StringRef name) {
  auto value = object.getString(name);
  return value ? value->str() : std::string("<missing>");
}

int in_private_mount_namespace(const std::function<int()>& body) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      _exit(k_no_mount_namespace);
    _exit(body());
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

std::vector<llvm::json::Object> read_json_lines(const std::string& path) {
  std::vector<llvm::json::Object> objects;
  std::istringstream lines(read_file(path));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty())
      continue;
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
    if (!value) {
      FAIL_CHECK("log line is not JSON: " << line << " (" << llvm::toString(value.takeError())
                                           << ")");
      continue;
    }
    if (llvm::json::Object* object = value->getAsObject())
      objects.push_back(std::move(*object));
    else
      FAIL_CHECK("log line is not a JSON object: " << line);
  }
  return objects;
}

std::vector<llvm::json::Object> events_named(const std::vector<llvm::json::Object>& events,
                                             const std::string& name, const std::string& kernel) {
  std::vector<llvm::json::Object> selected;
  for (const llvm::json::Object& event : events) {
    if (event.getString("event") != llvm::StringRef(name))
      continue;
    if (!kernel.empty() && event.getString("kernel") != llvm::StringRef(kernel))
      continue;
    selected.push_back(event);
  }
  return selected;
}

} // namespace specjit::test
