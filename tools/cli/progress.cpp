#include "progress.h"

#include <fmt/format.h>

#include <cstdio>
#include <unistd.h>

namespace specjit::cli {

ProgressBar::ProgressBar(size_t total, std::string unit)
    : m_total(total), m_unit(std::move(unit)), m_enabled(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (m_enabled && m_drawn)
    std::fputs("\r\033[K", stderr);
}

void ProgressBar::update(size_t done, size_t failed) {
  if (!m_enabled)
    return;
  std::lock_guard<std::mutex> guard(m_mutex);
  auto now = std::chrono::steady_clock::now();
  if (m_drawn && done < m_total && now - m_last < std::chrono::milliseconds(100))
    return;
  m_last = now;
  m_drawn = true;
  constexpr size_t k_width = 30;
  size_t shown = std::min(done, m_total);
  size_t filled = m_total == 0 ? k_width : shown * k_width / m_total;
  bool megabytes = m_unit == "MB";
  size_t scale = megabytes ? (1u << 20) : 1;
  fmt::print(stderr, "\r[{}{}] {}/{} {}{}", std::string(filled, '#'),
             std::string(k_width - filled, ' '), shown / scale, m_total / scale, m_unit,
             failed ? fmt::format(", {} failed", failed) : "");
  std::fflush(stderr);
}

} // namespace specjit::cli
