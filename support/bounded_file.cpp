#include "support/bounded_file.h"

#include "support/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace specjit {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

std::string io_text() { return std::strerror(errno); }

} // namespace

llvm::Expected<RegularFile> RegularFile::open(llvm::StringRef path, llvm::StringRef what,
                                              uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer. It is cleared again
  // below, so reads of the (regular) file behave as usual.
  int fd = ::open(path.str().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return make_error(errno == ENOENT ? Errc::not_found : Errc::io, "cannot read {} {}: {}",
                      what.str(), path.str(), io_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string text = io_text();
    ::close(fd);
    return make_error(Errc::io, "cannot read {} {}: {}", what.str(), path.str(), text);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::invalid_argument, "{} {} is {}; only regular files are read",
                      what.str(), path.str(), kind_of(st.st_mode));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    return make_error(Errc::invalid_argument, "{} {} is {} bytes; the limit is {} bytes",
                      what.str(), path.str(), size, max_bytes);
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return RegularFile(fd, size);
}

RegularFile::RegularFile(RegularFile&& other) noexcept : m_fd(other.m_fd), m_size(other.m_size) {
  other.m_fd = -1;
}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0)
      ::close(m_fd);
    m_fd = other.m_fd;
    m_size = other.m_size;
    other.m_fd = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (m_fd >= 0)
    ::close(m_fd);
}

llvm::Expected<std::string> read_regular_file(llvm::StringRef path, llvm::StringRef what,
                                              uint64_t max_bytes) {
  auto file = RegularFile::open(path, what, max_bytes);
  if (!file)
    return file.takeError();
  std::string text;
  text.resize(static_cast<size_t>(file->size()));
  size_t done = 0;
  // The file may grow after fstat: read at most max_bytes + 1 to notice it without a bound.
  while (true) {
    if (done == text.size()) {
      if (text.size() > max_bytes)
        return make_error(Errc::invalid_argument, "{} {} grew past the limit of {} bytes",
                          what.str(), path.str(), max_bytes);
      text.resize(std::min<uint64_t>(max_bytes + 1, text.size() + 65536));
    }
    ssize_t got = ::read(file->fd(), text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return make_error(Errc::io, "cannot read {} {}: {}", what.str(), path.str(), io_text());
    if (got == 0)
      break;
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

LineReader::LineReader(RegularFile file, size_t max_line)
    : m_file(std::move(file)), m_max_line(std::max<size_t>(max_line, 16)) {
  m_buffer.resize(m_max_line);
}

bool LineReader::fill() {
  if (m_start > 0) {
    std::memmove(m_buffer.data(), m_buffer.data() + m_start, m_end - m_start);
    m_end -= m_start;
    m_start = 0;
  }
  while (m_end < m_buffer.size()) {
    ssize_t got = ::read(m_file.fd(), m_buffer.data() + m_end, m_buffer.size() - m_end);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      m_error = io_text();
    if (got <= 0) {
      m_eof = true;
      return false;
    }
    m_end += static_cast<size_t>(got);
    return true;
  }
  return false; // full: a line longer than the buffer
}

bool LineReader::next(llvm::StringRef& line) {
  while (true) {
    llvm::StringRef pending(m_buffer.data() + m_start, m_end - m_start);
    size_t newline = pending.find('\n');
    if (newline != llvm::StringRef::npos) {
      m_start += newline + 1;
      m_consumed += newline + 1;
      if (m_skipping) { // the tail of a cut line
        m_skipping = false;
        continue;
      }
      line = pending.take_front(newline);
      return true;
    }
    if (!m_eof && fill())
      continue;
    if (pending.empty() && m_eof)
      return false;
    // No newline: the last line of the file, or one longer than the buffer.
    m_start = m_end;
    m_consumed += pending.size();
    bool was_skipping = m_skipping;
    m_skipping = !m_eof;
    if (was_skipping)
      continue;
    line = pending;
    return true;
  }
}

llvm::Error LineReader::take_error() {
  if (m_error.empty())
    return llvm::Error::success();
  return make_error(Errc::io, "read failed: {}", std::exchange(m_error, std::string()));
}

} // namespace specjit
