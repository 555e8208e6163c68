#include "runtime/event_log.h"

#include "support/logging.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

namespace specjit::runtime {

std::string utc_timestamp_now() {
  using namespace std::chrono;
  auto now = system_clock::now();
  int64_t micros = duration_cast<microseconds>(now.time_since_epoch()).count();
  time_t seconds = static_cast<time_t>(micros / 1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     micros % 1'000'000);
}

EventLog::EventLog(std::optional<std::string> path) : m_path(std::move(path)) {}

EventLog::~EventLog() {
  if (m_fd >= 0)
    ::close(m_fd);
}

void EventLog::write(llvm::json::Object event) {
  if (!m_path)
    return;
  event["v"] = k_log_schema_version;
  event["ts"] = utc_timestamp_now();
  event["pid"] = static_cast<int64_t>(::getpid());
  std::string line;
  llvm::raw_string_ostream os(line);
  os << llvm::json::Value(std::move(event));
  os.flush();
  line.push_back('\n');

  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_fd < 0) {
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(*m_path));
    m_fd = ::open(m_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  // One write(2) per line with O_APPEND: lines of concurrent processes never interleave.
  ssize_t written = m_fd < 0 ? -1 : ::write(m_fd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size()) && !m_reported_failure) {
    m_reported_failure = true;
    log_warning(llvm::Twine("cannot write the recompilation log ") + *m_path + ": " +
                std::strerror(errno) + "; further events are dropped silently");
  }
}

} // namespace specjit::runtime
