// Bounded input: every file specjit reads that someone else may have written (manifests, logs,
// --from-log files, import bundles) goes through here. Only regular files are read; a FIFO, a
// device (/dev/zero), a directory or a socket is refused by name before any byte is read, and a
// file past its size limit is refused instead of filling memory.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>

namespace specjit {

// Limits of the readers (docs/reliability.md, "Bounded input").
inline constexpr uint64_t k_max_manifest_bytes = 16ull << 20; // 16 MiB
inline constexpr uint64_t k_max_bundle_bytes = 1ull << 30;    // 1 GiB
inline constexpr uint64_t k_max_log_bytes = 16ull << 30;      // 16 GiB, read as a stream
inline constexpr size_t k_max_log_line_bytes = 1u << 20;      // 1 MiB per log line

// An open, fstat-checked regular file. Opened with O_NONBLOCK, so opening a FIFO with no writer
// never blocks; the check happens on the descriptor, so a swap after it changes nothing.
class RegularFile {
public:
  // `what` names the file in errors: "manifest", "log", "bundle".
  static llvm::Expected<RegularFile> open(llvm::StringRef path, llvm::StringRef what,
                                          uint64_t max_bytes);
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return m_fd; }
  uint64_t size() const { return m_size; } // at open time

private:
  RegularFile(int fd, uint64_t size) : m_fd(fd), m_size(size) {}
  int m_fd = -1;
  uint64_t m_size = 0;
};

// The whole file, when it is a regular file of at most max_bytes. Errors name the path and
// say what it is ("a FIFO", "a directory") or how large it is and the limit.
llvm::Expected<std::string> read_regular_file(llvm::StringRef path, llvm::StringRef what,
                                              uint64_t max_bytes);

// Reads a regular file line by line with a fixed buffer: memory stays bounded whatever the
// file's size. A line longer than max_line is handed over cut to max_line bytes (the reader
// of a log counts it as unreadable).
class LineReader {
public:
  explicit LineReader(RegularFile file, size_t max_line = k_max_log_line_bytes);
  // The next line without its '\n'; false at the end. An I/O error ends the file and is
  // kept in error().
  bool next(llvm::StringRef& line);
  uint64_t bytes_read() const { return m_consumed; }
  uint64_t size() const { return m_file.size(); }
  llvm::Error take_error();

private:
  bool fill();

  RegularFile m_file;
  size_t m_max_line;
  std::string m_buffer;
  size_t m_start = 0, m_end = 0;
  uint64_t m_consumed = 0;
  bool m_eof = false;
  bool m_skipping = false; // the rest of a line longer than m_max_line
  std::string m_error;
};

} // namespace specjit
