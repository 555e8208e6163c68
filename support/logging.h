// Human-facing diagnostics on stderr ("specjit: warning: ..."). The recompilation log
// (runtime/event_log) is the machine-readable record; this is for people watching a terminal.
#pragma once

#include <llvm/ADT/Twine.h>

namespace specjit {

enum class LogLevel { quiet, warning, info };

// Process-wide level; warnings by default. Set once at start-up (the CLI's -q / -v).
void set_log_level(LogLevel level);
void log_warning(const llvm::Twine& message);
void log_info(const llvm::Twine& message);

} // namespace specjit
