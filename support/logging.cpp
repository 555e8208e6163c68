#include "support/logging.h"

#include <llvm/Support/raw_ostream.h>

#include <atomic>

namespace specjit {

namespace {
std::atomic<LogLevel> g_level{LogLevel::warning};
}

void set_log_level(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }

void log_warning(const llvm::Twine& message) {
  if (g_level.load(std::memory_order_relaxed) >= LogLevel::warning)
    llvm::errs() << "specjit: warning: " << message << "\n";
}

void log_info(const llvm::Twine& message) {
  if (g_level.load(std::memory_order_relaxed) >= LogLevel::info)
    llvm::errs() << "specjit: " << message << "\n";
}

} // namespace specjit
