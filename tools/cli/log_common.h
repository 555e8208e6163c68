// What `log` and `why` share: finding the log, reading it with the --kernel / --since filters,
// and printing time stamps.
#pragma once

#include "cli.h"

#include "deploy/log_reader.h"

#include <optional>
#include <string>
#include <vector>

namespace specjit::cli {


// --file, else the configured log path; an error when logging is off and no file is given.
llvm::Expected<std::string> log_file(const Context& context);
// "2026-11-29T16:00:00Z" or an age before now ("90s", "30m", "2h", "1d"), in microseconds.
llvm::Expected<int64_t> parse_since(llvm::StringRef text);
// k_exit_usage (after the message) when --since is given and does not parse, else k_exit_ok.
int check_since(const Context& context);
// Streams the log and its rotated files (oldest first) with bounded memory, handing `visit`
// the events of --kernel (when given) at or after --since (when given). On a terminal, a
// progress line on stderr while it reads.
// `options.kernel` defaults to --kernel.
llvm::Expected<deploy::LogScan> stream_log(const Context& context, const std::string& path,
                                            deploy::LogVisitor visit,
                                            deploy::LogReadOptions options = {});
// Microseconds since the epoch as "2026-11-29T16:26:23Z".
std::string format_micros(int64_t micros);

Command why_command();

} // namespace specjit::cli
