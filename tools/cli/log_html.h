// `specjit log --html PAGE`: one self-contained page (inline CSS and SVG, no script, nothing
// fetched) that shows the compile timeline of every kernel coloured by phase, storms and
// strict refusals marked, a per-kernel table and the slowest compiles with their reasons.
#pragma once

#include "log_summary.h"

#include <llvm/Support/Error.h>

#include <string>

namespace specjit::cli {

// The page as text.
std::string render_log_page(const std::string& log_path, const deploy::LogScan& scan,
                            const LogSummary& log);
// Writes it to `page` (through a temporary file and a rename: never a half page).
llvm::Error write_log_page(const std::string& page, const std::string& log_path,
                           const deploy::LogScan& scan, const LogSummary& log);

} // namespace specjit::cli
