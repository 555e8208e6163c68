// Shared machinery of the reliability tests (../shared/RELIABILITY.md, docs/reliability.md):
// helper processes started and reaped by hand (many at once, killed, stopped), reference
// compiles to check every cubin handed out against, the state of a cache root after a run, and
// the "[reliability] ID key=value ..." figure lines docs/reliability.md is filled from.
//
// Sizes are CI-sized unless SPECJIT_RELIABILITY_FULL=1 asks for the sizes of RELIABILITY.md.
#pragma once

#include "cache/disk_store.h"

#include "same_compile.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/JSON.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <map>
#include <sched.h>
#include <string>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace specjit::reliability {

using test::TempDir;

inline bool full_size() {
  const char* value = std::getenv("SPECJIT_RELIABILITY_FULL");
  return value != nullptr && std::string(value) == "1";
}
inline int sized(int ci, int full) { return full_size() ? full : ci; }

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prints "[reliability] ID k=v k=v ..." on stdout (and, so ctest -V shows it, through doctest).
inline void figures(const std::string& id,
                    const std::vector<std::pair<std::string, std::string>>& values) {
  std::string line = "[reliability] " + id;
  for (const auto& [key, value] : values)
    line += " " + key + "=" + value;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}
inline std::string num(int64_t value) { return std::to_string(value); }
inline std::string num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

// The environment of a helper: everything under `dir`, target sm_90a (no device needed).
inline std::vector<std::string> env_for(const std::string& cache_root, const std::string& log,
                                        std::vector<std::string> extra = {}) {
  std::vector<std::string> env = {"SPECJIT_CACHE_DIR=" + cache_root, "SPECJIT_LOG=" + log,
                                  "SPECJIT_ARCH=sm_90a"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// A helper process started in the background; stdout and stderr go to files.
struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::chrono::steady_clock::time_point started;
  double finished_after_s = -1;
  int exit_code = -1; // -1: killed by a signal
  int signal_number = 0;
  std::string out() const { return test::read_file(out_path); }
  std::string err() const { return test::read_file(err_path); }
};

// No doctest macros here: also used in forked children. Starts `program` (the helper, the CLI).
inline Child spawn_program(const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::string& out_prefix) {
  Child child;
  child.out_path = out_prefix + ".out";
  child.err_path = out_prefix + ".err";
  child.started = std::chrono::steady_clock::now();
  child.pid = fork();
  if (child.pid == 0) {
    for (const std::string& entry : env) {
      size_t eq = entry.find('=');
      setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
    }
    int out = open(child.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(child.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    std::string path = program;
    argv.push_back(path.data());
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return child;
}

inline Child spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
                   const std::string& out_prefix) {
  return spawn_program(SPECJIT_TEST_HELPER, args, env, out_prefix);
}

// Waits for the child (not for stops); returns false when waitpid failed.
inline bool reap(Child& child) {
  int status = 0;
  if (waitpid(child.pid, &status, 0) != child.pid)
    return false;
  child.finished_after_s = seconds_since(child.started);
  if (WIFEXITED(status))
    child.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    child.signal_number = WTERMSIG(status);
  return true;
}

// Waits until the child stops itself (SIGSTOP), or exits; true when it stopped.
inline bool wait_stopped(Child& child) {
  int status = 0;
  if (waitpid(child.pid, &status, WUNTRACED) != child.pid)
    return false;
  if (WIFSTOPPED(status))
    return true;
  if (WIFEXITED(status))
    child.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    child.signal_number = WTERMSIG(status);
  return false;
}

// The JSON object a helper printed (an empty object when it printed none).
inline llvm::json::Object json_of(const std::string& out) {
  std::string line = out.substr(0, out.find('\n'));
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
  if (!value) {
    llvm::consumeError(value.takeError());
    return {};
  }
  if (const llvm::json::Object* object = value->getAsObject())
    return *object;
  return {};
}
inline int64_t field(const llvm::json::Object& object, llvm::StringRef name) {
  return test::int_field(object, name);
}

// Runs one helper to completion and returns its JSON; fails the test when it printed none.
inline llvm::json::Object run_helper(const std::vector<std::string>& args,
                                     const std::vector<std::string>& env,
                                     const std::string& scratch_prefix) {
  Child child = spawn(args, env, scratch_prefix);
  REQUIRE(child.pid > 0);
  REQUIRE(reap(child));
  llvm::json::Object object = json_of(child.out());
  REQUIRE_MESSAGE(!object.empty(), "helper printed no JSON; exit " << child.exit_code << " signal "
                                                                     << child.signal_number
                                                                     << "; stderr: "
                                                                     << child.err());
  return object;
}

// Reference compiles: DIR/<key hex>.cubin for scale_tokens<cols, v>, v in [first, last], under
// `policy`, compiled by one helper into a private cache that nothing else touches.
struct References {
  std::string dir;
  std::vector<std::string> keys; // hex
};
inline References make_references(const TempDir& scratch, int64_t first, int64_t last,
                                  const std::string& policy = "exact", int64_t cols = 128) {
  References refs;
  refs.dir = scratch / "reference";
  mkdir(refs.dir.c_str(), 0755);
  llvm::json::Object result = run_helper(
      {"prepare", "--policy", policy, "--cols", std::to_string(cols), "--first",
       std::to_string(first), "--last", std::to_string(last), "--threads", "2",
       "--write-reference", refs.dir},
      env_for(scratch / "reference-cache", scratch / "reference-events.jsonl"),
      scratch / "reference-helper");
  REQUIRE(field(result, "failures") == 0);
  REQUIRE(field(result, "compiles") == last - first + 1);
  if (DIR* dir = opendir(refs.dir.c_str())) {
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name.size() > 6 && name.substr(name.size() - 6) == ".cubin")
        refs.keys.push_back(name.substr(0, name.size() - 6));
    }
    closedir(dir);
  }
  REQUIRE(refs.keys.size() == static_cast<size_t>(last - first + 1));
  return refs;
}

// The names of the files directly in `dir` (none when it does not exist).
inline std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* handle = opendir(dir.c_str())) {
    while (dirent* entry = readdir(handle)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    closedir(handle);
  }
  return names;
}
inline int64_t temp_files_left(const std::string& root) {
  return static_cast<int64_t>(names_in(root + "/v1/tmp").size());
}

// What a cache root holds after a run: every entry verified and compared with its reference.
struct RootCheckResult {
  int64_t entries = 0;
  int64_t failing_verification = 0; // DiskStore::verify findings
  int64_t corrupt_loads = 0;        // entries that verify but differ from the reference
  int64_t unverified = 0;           // entries with no reference
  uint64_t bytes = 0;
};
inline RootCheckResult check_root(const std::string& root, const std::string& reference_dir) {
  RootCheckResult result;
  cache::StoreOptions options;
  options.root = root;
  cache::DiskStore store(options);
  result.failing_verification = static_cast<int64_t>(store.verify(/*repair=*/false).size());
  for (const cache::ListedEntry& entry : store.list()) {
    ++result.entries;
    result.bytes += entry.bytes;
    if (!entry.key)
      continue;
    cache::LookupResult found = store.lookup(*entry.key, entry.kernel);
    if (!found.hit)
      continue;
    std::string reference_path = reference_dir + "/" + entry.key->hex() + ".cubin";
    struct stat st;
    if (stat(reference_path.c_str(), &st) != 0) {
      ++result.unverified;
      continue;
    }
    if (compare_compiles(found.hit->entry.cubin, test::read_file(reference_path)) ==
        Sameness::different)
      ++result.corrupt_loads;
  }
  return result;
}

// compile events of a log per key; duplicates: compiles beyond the first of each key.
struct CompileCount {
  int64_t compiles = 0;
  int64_t keys = 0;
  int64_t duplicates = 0;
};
inline CompileCount count_compiles(const std::string& log) {
  CompileCount count;
  std::map<std::string, int64_t> per_key;
  struct stat st;
  if (stat(log.c_str(), &st) != 0)
    return count;
  for (const llvm::json::Object& event :
       test::events_named(test::read_json_lines(log), "compile"))
    ++per_key[test::string_field(event, "key")];
  for (const auto& [key, n] : per_key) {
    count.compiles += n;
    count.duplicates += n - 1;
  }
  count.keys = static_cast<int64_t>(per_key.size());
  return count;
}

inline void touch(const std::string& path) { test::write_file(path, ""); }

// Runs `body` with a private mount namespace (test_support.h). Returns the body's exit code;
// 77 (after printing why) when this machine does not allow it.
inline int in_private_mount_namespace(const char* test_id, const std::function<int()>& body) {
  int code = test::in_private_mount_namespace(body);
  if (code == test::k_no_mount_namespace)
    std::printf("[reliability] SKIPPED %s: mount namespaces or mounts are not permitted here\n",
                test_id);
  return code;
}

} // namespace specjit::reliability
