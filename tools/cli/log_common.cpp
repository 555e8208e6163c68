#include "log_common.h"
#include "progress.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <memory>

namespace specjit::cli {

llvm::Expected<std::string> log_file(const Context& context) {
  if (auto file = context.args.value("--file"))
    return *file;
  if (std::optional<std::string> path = context.config.log_path())
    return *path;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "logging is off (SPECJIT_LOG=off); name a log with --file");
}

llvm::Expected<int64_t> parse_since(llvm::StringRef text) {
  if (std::optional<int64_t> micros = deploy::parse_utc_timestamp(text))
    return *micros;
  int64_t unit = 0;
  switch (text.empty() ? '\0' : text.back()) {
  case 's':
    unit = 1;
    break;
  case 'm':
    unit = 60;
    break;
  case 'h':
    unit = 3600;
    break;
  case 'd':
    unit = 86400;
    break;
  default:
    break;
  }
  int64_t amount = 0;
  if (unit == 0 || text.drop_back().getAsInteger(10, amount) || amount < 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--since '%s' is neither a UTC time (2026-11-29T16:00:00Z) nor "
                                   "an age (30m, 2h, 1d)",
                                   text.str().c_str());
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  return now - amount * unit * 1'000'000;
}

int check_since(const Context& context) {
  if (auto text = context.args.value("--since"))
    if (auto parsed = parse_since(*text); !parsed)
      return usage_error(context, llvm::toString(parsed.takeError()));
  return k_exit_ok;
}

llvm::Expected<deploy::LogScan> stream_log(const Context& context, const std::string& path,
                                            deploy::LogVisitor visit,
                                            deploy::LogReadOptions options) {
  std::optional<int64_t> since;
  if (auto text = context.args.value("--since")) {
    auto parsed = parse_since(*text);
    if (!parsed)
      return parsed.takeError();
    since = *parsed;
  }
  if (!options.kernel)
    options.kernel = context.args.value("--kernel");
  std::unique_ptr<ProgressBar> bar;
  auto progress = [&](const deploy::LogProgress& seen) {
    if (!bar)
      bar = std::make_unique<ProgressBar>(seen.bytes_total, "MB");
    bar->update(seen.bytes_read);
  };
  return deploy::scan_log(
      path,
      [&](deploy::LogEvent&& event, llvm::StringRef file) {
        if (since && (!event.ts_micros || *event.ts_micros < *since))
          return;
        visit(std::move(event), file);
      },
      options, deploy::LogProgressSink(progress));
}

std::string format_micros(int64_t micros) {
  std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

} // namespace specjit::cli
