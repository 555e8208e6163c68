// J1-J5 (docs/reliability.md, "Bounded input"): what used to take gigabytes or hang. /dev/zero,
// a FIFO with no writer and a directory given as a manifest, a --from-log file, a log file or an
// import bundle; a file past the size limit; a manifest with a duplicate key; settings that
// overflow. Each is refused by a real `specjit` process with a clear message, quickly, in
// bounded memory, changing nothing.
#include "reliability_support.h"

#include <llvm/Support/FileSystem.h>

#include <sys/resource.h>

using namespace specjit;
using namespace specjit::reliability;

namespace {

struct Measured {
  int exit_code = -1; // -1: killed (it ran past the timeout)
  double seconds = 0;
  int64_t max_rss_kb = 0;
  std::string err;
};

// Runs the CLI with a deadline (a hang is a failure, not a stuck test), measuring its peak RSS.
Measured run_cli(const std::vector<std::string>& args, const TempDir& dir,
                 const std::vector<std::string>& env_extra = {}, double timeout_s = 20) {
  Child child = spawn_program(SPECJIT_CLI, args,
                              env_for(dir / "cache", dir / "events.jsonl", env_extra), dir / "cli");
  Measured m;
  int status = 0;
  struct rusage usage {};
  while (wait4(child.pid, &status, WNOHANG, &usage) == 0) {
    if (seconds_since(child.started) > timeout_s) {
      kill(child.pid, SIGKILL);
      wait4(child.pid, &status, 0, &usage);
      break;
    }
    usleep(10000);
  }
  m.seconds = seconds_since(child.started);
  if (WIFEXITED(status))
    m.exit_code = WEXITSTATUS(status);
  m.max_rss_kb = usage.ru_maxrss;
  m.err = child.err();
  return m;
}

struct Input {
  std::string what; // how the CLI is given the file
  std::vector<std::string> args;
};

std::vector<Input> inputs_for(const std::string& file) {
  return {{"manifest", {"precompile", "--manifest", file}},
          {"--from-log", {"precompile", "--from-log", file}},
          {"log --file", {"log", "--file", file}},
          {"why --file", {"why", "scale_tokens", "--file", file}},
          {"import", {"import", file}}};
}

// The memory a refusal may take: what the CLI takes to print its usage, plus 64 MiB (about
// 100 MiB in all on a plain build; a sanitizer's shadow memory raises both alike).
int64_t rss_limit_kb(const TempDir& dir) {
  static const int64_t limit = run_cli({"--help"}, dir).max_rss_kb + 64 * 1024;
  return limit;
}

void check_refused(const TempDir& dir, const std::string& file, const std::string& expected,
                   const std::string& id, double& slowest, int64_t& largest_kb) {
  for (const Input& input : inputs_for(file)) {
    CAPTURE(input.what);
    Measured m = run_cli(input.args, dir);
    INFO(m.err);
    CHECK(m.exit_code >= 1); // refused; -1 would mean it hung and was killed
    CHECK(m.exit_code <= 2);
    CHECK(m.err.find(file) != std::string::npos);
    CHECK(m.err.find(expected) != std::string::npos);
    CHECK(m.seconds < 5);
    CHECK(m.max_rss_kb < rss_limit_kb(dir));
    slowest = std::max(slowest, m.seconds);
    largest_kb = std::max(largest_kb, m.max_rss_kb);
  }
  CHECK_FALSE(llvm::sys::fs::exists(dir / "cache/v1/entries"));
  (void)id;
}

} // namespace

TEST_CASE("J1: /dev/zero, a FIFO and a directory are refused by every reader, never read") {
  TempDir dir;
  REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
  double slowest = 0;
  int64_t largest_kb = 0;
  check_refused(dir, "/dev/zero", "is a character device; only regular files are read", "J1",
                slowest, largest_kb);
  check_refused(dir, dir / "fifo", "is a FIFO; only regular files are read", "J1", slowest,
                largest_kb);
  llvm::sys::fs::create_directories(dir / "a-directory");
  check_refused(dir, dir / "a-directory", "is a directory; only regular files are read", "J1",
                slowest, largest_kb);
  figures("J1", {{"readers", "5"},
                 {"inputs", "3"},
                 {"slowest_s", num(slowest)},
                 {"max_rss_mb", num(static_cast<double>(largest_kb) / 1024)}});
}

TEST_CASE("J2: a manifest or bundle past the size limit is refused with its size and the limit") {
  TempDir dir;
  // Sparse: a 2 GiB file costs no disk and would cost 2 GiB of memory to read whole.
  std::string huge = dir / "huge.json";
  int fd = open(huge.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, off_t{2} << 30) == 0);
  close(fd);
  Measured manifest = run_cli({"precompile", "--manifest", huge}, dir);
  INFO(manifest.err);
  CHECK(manifest.exit_code == 2);
  CHECK(manifest.err.find("manifest " + huge + " is 2147483648 bytes; the limit is 16777216 bytes") !=
        std::string::npos);
  Measured bundle = run_cli({"import", huge}, dir);
  INFO(bundle.err);
  CHECK(bundle.exit_code == 1);
  CHECK(bundle.err.find("bundle " + huge + " is 2147483648 bytes; the limit is 1073741824") !=
        std::string::npos);
  CHECK(std::max(manifest.max_rss_kb, bundle.max_rss_kb) < rss_limit_kb(dir));
  figures("J2", {{"file_gb", "2"},
                 {"manifest_s", num(manifest.seconds)},
                 {"import_s", num(bundle.seconds)},
                 {"max_rss_mb",
                  num(static_cast<double>(std::max(manifest.max_rss_kb, bundle.max_rss_kb)) / 1024)}});
}

TEST_CASE("J3: a manifest with a duplicate key is refused with file:line, nothing compiled") {
  TempDir dir;
  std::string manifest = dir / "dup.json";
  test::write_file(manifest, R"({"variants": [
  {"kernel": "scale_tokens", "values": {"cols": 64, "num_tokens": [1, 2]},
   "policies": {"num_tokens": "exact"},
   "values": {"cols": 64, "num_tokens": 3}}]})");
  Measured m = run_cli({"precompile", "--manifest", manifest}, dir);
  INFO(m.err);
  CHECK(m.exit_code == 2);
  CHECK(m.err.find(manifest + ":4: field 'variants[0].values': duplicate key") != std::string::npos);
  CHECK_FALSE(llvm::sys::fs::exists(dir / "cache/v1/entries"));
  figures("J3", {{"exit", num(static_cast<int64_t>(m.exit_code))}});
}

TEST_CASE("J4: integer settings that overflow or leave their range stop every command") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"SPECJIT_CACHE_MAX_SIZE=99999999999999999999", "SPECJIT_CACHE_MAX_SIZE"},
      {"SPECJIT_CACHE_MAX_SIZE=17179869184G", "does not fit in 64 bits"},
      {"SPECJIT_LOCK_TIMEOUT_MS=99999999999999999999", "expected an integer in [0, 86400000]"},
      {"SPECJIT_STORM_THRESHOLD=0", "expected an integer in [1, 1000000]"},
      {"SPECJIT_DEVICE=2147483648", "expected an integer in [0, 1023]"},
      {"SPECJIT_STALE_TEMP_SECONDS=-5", "expected an integer in [1, 31622400]"},
      {"SPECJIT_LOG_MAX_SIZE=1", "SPECJIT_LOG_MAX_SIZE: '1' is out of range"},
  };
  for (const auto& [setting, expected] : cases) {
    CAPTURE(setting);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"config"}, std::vector<std::string>{"precompile"}}) {
      Measured m = run_cli(args, dir, {setting});
      INFO(m.err);
      CHECK(m.exit_code == 2);
      CHECK(m.err.find(setting.substr(0, setting.find('='))) != std::string::npos);
      CHECK(m.err.find(expected) != std::string::npos);
    }
  }
  CHECK_FALSE(llvm::sys::fs::exists(dir / "cache/v1/entries"));
  figures("J4", {{"settings", num(static_cast<int64_t>(cases.size()))}, {"commands", "2"}});
}
