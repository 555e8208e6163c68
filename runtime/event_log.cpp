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
#include <sys/file.h>
#include <sys/stat.h>
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

std::string rotated_log_path(llvm::StringRef path, int index) {
  llvm::StringRef extension = llvm::sys::path::extension(path);
  llvm::StringRef stem = path.drop_back(extension.size());
  return fmt::format("{}.{}{}", stem.str(), index, extension.str());
}

std::vector<std::string> rotated_log_paths(llvm::StringRef path) {
  std::vector<std::string> paths;
  for (int index = k_kept_rotations; index >= 1; --index)
    paths.push_back(rotated_log_path(path, index));
  paths.push_back(path.str());
  return paths;
}

int open_log_for_append(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
}

EventLog::EventLog(std::optional<std::string> path, uint64_t max_bytes, LogOpener opener)
    : m_path(std::move(path)), m_max_bytes(max_bytes), m_opener(std::move(opener)) {}

int EventLog::open_file(std::string& why) {
  if (m_opener) {
    llvm::Expected<int> fd = m_opener();
    if (fd)
      return *fd;
    why = llvm::toString(fd.takeError());
    return -1;
  }
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(*m_path));
  int fd = open_log_for_append(*m_path);
  if (fd < 0)
    why = std::strerror(errno);
  return fd;
}

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
  append(line);
  rotate_if_full();
}

void EventLog::append(const std::string& line) {
  std::string why;
  if (m_fd < 0)
    m_fd = open_file(why);
  // One write(2) per line with O_APPEND: lines of concurrent processes never interleave.
  ssize_t written = m_fd < 0 ? -1 : ::write(m_fd, line.data(), line.size());
  if (written == static_cast<ssize_t>(line.size()))
    return;
  if (why.empty())
    why = std::strerror(written < 0 ? errno : ENOSPC);
  if (written > 0) {
    // A cut line: take it back off, so the next event is not glued to it. Our bytes end at
    // the file offset; when another process appended after them they stay (that reader skips
    // one unreadable line) rather than cutting the other process's line.
    off_t end = ::lseek(m_fd, 0, SEEK_CUR);
    struct stat st {};
    if (end >= written && ::flock(m_fd, LOCK_EX) == 0) {
      if (::fstat(m_fd, &st) == 0 && st.st_size == end)
        (void)::ftruncate(m_fd, end - written);
      ::flock(m_fd, LOCK_UN);
    }
  }
  if (!m_reported_failure) {
    m_reported_failure = true;
    log_warning(llvm::Twine("cannot write the recompilation log ") + *m_path + ": " + why +
                "; events are dropped until it can be written again");
  }
}

void EventLog::rotate_if_full() {
  struct stat mine {};
  if (m_fd < 0 || ::fstat(m_fd, &mine) != 0 || static_cast<uint64_t>(mine.st_size) < m_max_bytes)
    return;
  // The file lock makes one process rotate; the others find the path on a new file and
  // reopen. Renames keep every complete line: writers still holding the old file append to
  // the rotated name.
  if (::flock(m_fd, LOCK_EX) != 0)
    return;
  struct stat current {};
  bool still_ours = ::lstat(m_path->c_str(), &current) == 0 && current.st_ino == mine.st_ino &&
                    current.st_dev == mine.st_dev;
  if (still_ours) {
    for (int index = k_kept_rotations; index > 1; --index)
      (void)::rename(rotated_log_path(*m_path, index - 1).c_str(),
                     rotated_log_path(*m_path, index).c_str());
    (void)::rename(m_path->c_str(), rotated_log_path(*m_path, 1).c_str());
  }
  ::flock(m_fd, LOCK_UN);
  ::close(m_fd);
  m_fd = -1; // the next event opens (creates) the new file
}

} // namespace specjit::runtime
