// A redis-server child process on a free loopback port, with no persistence: what the fleet
// tier's tests (redis_server.h) and `specjit-bench remote` run against. Header-only and free of
// doctest and of the library, so both can include it.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace specjit::test {

// A port no socket is bound to right now (the kernel's pick for port 0). Another process may
// take it before the caller binds it: good enough for a loopback server started at once.
inline int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

inline bool port_answers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

// Started by the constructor, SIGKILLed by the destructor. `extra`: more redis-server flags.
class RedisProcess {
public:
  explicit RedisProcess(std::vector<std::string> extra = {})
      : m_port(free_loopback_port()), m_extra(std::move(extra)) {
    start();
  }
  ~RedisProcess() { kill(); }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  int port() const { return m_port; }
  bool running() const { return m_pid > 0; }
  // redis://127.0.0.1:PORT/DB?PARAMS
  std::string url(const std::string& params = "", int db = 0) const {
    return "redis://127.0.0.1:" + std::to_string(m_port) + "/" + std::to_string(db) +
           (params.empty() ? "" : "?" + params);
  }
  // Starts the server (again, on the same port); true once it accepts connections (within 5 s).
  bool start() {
    m_pid = ::fork();
    if (m_pid == 0) {
      std::vector<std::string> args = {
          "redis-server", "--port", std::to_string(m_port), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no",     "--loglevel",           "warning"};
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
    if (m_pid < 0)
      return false;
    for (int i = 0; i < 500; ++i) {
      if (port_answers(m_port))
        return true;
      int status = 0;
      if (::waitpid(m_pid, &status, WNOHANG) == m_pid) { // exited: not installed, port taken
        m_pid = -1;
        return false;
      }
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

private:
  int m_port;
  std::vector<std::string> m_extra;
  pid_t m_pid = -1;
};

} // namespace specjit::test
