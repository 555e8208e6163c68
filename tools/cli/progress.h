// A progress line on stderr for long work (precompile's variants, a long log read), drawn only
// when stderr is a terminal, so pipes and CI logs never see control characters.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace specjit::cli {

class ProgressBar {
public:
  // `unit` follows the counts: "variants"; "MB" shows done/total in megabytes.
  ProgressBar(size_t total, std::string unit);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return m_enabled; }
  // Redraws at most ten times a second (and always at the end). Thread-safe.
  void update(size_t done, size_t failed = 0);

private:
  size_t m_total;
  std::string m_unit;
  bool m_enabled;
  bool m_drawn = false;
  std::mutex m_mutex;
  std::chrono::steady_clock::time_point m_last;
};

} // namespace specjit::cli
