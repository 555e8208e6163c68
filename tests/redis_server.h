// A real redis-server for the fleet tier's tests (no mock): started on a free loopback port
// with no persistence, killed at destruction. Tests that only need a server may share the one
// .ci/run starts (SPECJIT_TEST_REDIS, a redis:// URL) through a database of their own; tests
// that kill, pause or restart a server, or change its memory limit, start their own.
// Without redis-server installed, redis_or_skip prints "[remote] SKIPPED <test>: ..." and the
// caller returns.
#pragma once

#include "redis_process.h"
#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace specjit::test {

inline bool redis_or_skip(const char* test_name) {
  if (std::system("command -v redis-server >/dev/null 2>&1") == 0)
    return true;
  std::printf("[remote] SKIPPED %s: redis-server is not installed\n", test_name);
  return false;
}

class RedisServer : public RedisProcess {
public:
  using RedisProcess::RedisProcess;
  // redis-cli against this server; its output.
  ProcessResult cli(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"/usr/bin/redis-cli", "-p", std::to_string(port())};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv);
  }
};

// The CI's shared server (SPECJIT_TEST_REDIS, redis://host:port/0) in database `db`, emptied
// first; else a server of this test's own.
class TestRedis {
public:
  explicit TestRedis(int db) {
    const char* shared = std::getenv("SPECJIT_TEST_REDIS");
    if (shared == nullptr || *shared == '\0') {
      m_own = std::make_unique<RedisServer>();
      m_base = m_own->url("", db);
      return;
    }
    std::string base = shared;
    m_base = base.substr(0, base.rfind('/')) + "/" + std::to_string(db);
    std::string port = base.substr(base.rfind(':') + 1);
    port = port.substr(0, port.find('/'));
    run_process({"/usr/bin/redis-cli", "-p", port, "-n", std::to_string(db), "FLUSHDB"});
  }
  std::string url(const std::string& params = "") const {
    return m_base + (params.empty() ? "" : "?" + params);
  }

private:
  std::unique_ptr<RedisServer> m_own;
  std::string m_base;
};

} // namespace specjit::test
