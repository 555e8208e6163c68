// A real redis-server for the fleet tier's tests (no mock): started on a free loopback port
// with no persistence, killed at destruction. Tests that only need a server may share the one
// .ci/run starts (SPECJIT_TEST_REDIS, a redis:// URL) through a database of their own; tests
// that kill, pause or restart a server, or change its memory limit, start their own.
// Without redis-server installed, redis_or_skip prints "[remote] SKIPPED <test>: ..." and the
// caller returns.
#pragma once

#include "test_support.h"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <memory>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace specjit::test {

inline bool redis_or_skip(const char* test_name) {
  if (std::system("command -v redis-server >/dev/null 2>&1") == 0)
    return true;
  std::printf("[remote] SKIPPED %s: redis-server is not installed\n", test_name);
  return false;
}

inline int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), size);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

inline bool port_answers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

class RedisServer {
public:
  explicit RedisServer(std::vector<std::string> extra = {})
      : m_port(free_loopback_port()), m_extra(std::move(extra)) {
    start();
  }
  ~RedisServer() { kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return m_port; }
  bool running() const { return m_pid > 0; }
  // redis://127.0.0.1:PORT/DB?PARAMS
  std::string url(const std::string& params = "", int db = 0) const {
    return "redis://127.0.0.1:" + std::to_string(m_port) + "/" + std::to_string(db) +
           (params.empty() ? "" : "?" + params);
  }
  // Starts the server (again, on the same port); true once it accepts connections.
  bool start() {
    m_pid = ::fork();
    if (m_pid == 0) {
      std::vector<std::string> args = {"redis-server", "--port", std::to_string(m_port),
                                       "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                       "--loglevel", "warning"};
      args.insert(args.end(), m_extra.begin(), m_extra.end());
      std::vector<char*> argv;
      for (std::string& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      // Not through stdio: the parent's unflushed buffer would be written twice.
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::execvp("redis-server", argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {
      if (port_answers(m_port))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void kill() {
    if (m_pid <= 0)
      return;
    ::kill(m_pid, SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
    m_pid = -1;
  }
  // redis-cli against this server; its output.
  ProcessResult cli(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"/usr/bin/redis-cli", "-p", std::to_string(m_port)};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv);
  }

private:
  int m_port;
  std::vector<std::string> m_extra;
  pid_t m_pid = -1;
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
