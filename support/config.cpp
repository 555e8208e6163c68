#include "support/config.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#include <cstdlib>
#include <fmt/ranges.h>

namespace specjit {

llvm::StringRef setting_source_name(SettingSource source) {
  switch (source) {
  case SettingSource::default_value: return "default";
  case SettingSource::environment: return "environment";
  case SettingSource::cli_flag: return "command line";
  case SettingSource::api: return "api";
  }
  return "default";
}

llvm::Expected<uint64_t> parse_size(llvm::StringRef text) {
  llvm::StringRef digits = text.trim();
  uint64_t unit = 1;
  if (!digits.empty()) {
    switch (llvm::toUpper(digits.back())) {
    case 'K': unit = 1ull << 10; break;
    case 'M': unit = 1ull << 20; break;
    case 'G': unit = 1ull << 30; break;
    case 'T': unit = 1ull << 40; break;
    default: break;
    }
    if (unit != 1)
      digits = digits.drop_back();
  }
  uint64_t number = 0;
  if (digits.empty() || digits.getAsInteger(10, number))
    return make_error(Errc::invalid_argument,
                      "'{}' is not a size; expected a number with an optional K, M, G or T suffix",
                      text.str());
  return number * unit;
}

llvm::Expected<StrictMode> parse_strict_mode(llvm::StringRef text) {
  if (text == "" || text == "off" || text == "0")
    return StrictMode::off;
  if (text == "warn")
    return StrictMode::warn;
  if (text == "error")
    return StrictMode::error;
  return make_error(Errc::invalid_argument, "'{}' is not a strict mode; expected warn or error",
                    text.str());
}

namespace {

llvm::Error bad_variable(llvm::StringRef name, llvm::Error cause) {
  return make_error(Errc::invalid_argument, "{}: {}", name.str(), llvm::toString(std::move(cause)));
}

template <typename T>
llvm::Error read_integer(Config::Lookup lookup, llvm::StringRef name, Setting<T>& setting,
                         T minimum) {
  std::optional<std::string> text = lookup(name);
  if (!text)
    return llvm::Error::success();
  int64_t value = 0;
  if (llvm::StringRef(*text).trim().getAsInteger(10, value) || value < static_cast<int64_t>(minimum))
    return make_error(Errc::invalid_argument, "{}: '{}' is not an integer >= {}", name.str(), *text,
                      minimum);
  setting.set(static_cast<T>(value), SettingSource::environment);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Config> Config::from_environment() {
  return from_lookup([](llvm::StringRef name) -> std::optional<std::string> {
    // The one getenv in specjit.
    const char* value = std::getenv(name.str().c_str());
    if (value == nullptr)
      return std::nullopt;
    return std::string(value);
  });
}

llvm::Expected<Config> Config::from_lookup(Lookup lookup) {
  Config config;
  config.xdg_cache_home = lookup("XDG_CACHE_HOME").value_or("");
  config.home = lookup("HOME").value_or("");
  config.cuda_home =
      lookup("SPECJIT_CUDA_HOME").value_or(lookup("CUDA_HOME").value_or("/usr/local/cuda"));
  config.cutlass_include = lookup("SPECJIT_CUTLASS_INCLUDE").value_or("");
  // An empty variable means unset: a shell's `export X=` must not differ from no X.
  auto non_empty = [&](llvm::StringRef name) -> std::optional<std::string> {
    std::optional<std::string> value = lookup(name);
    if (value && value->empty())
      return std::nullopt;
    return value;
  };
  if (auto dir = non_empty("SPECJIT_CACHE_DIR"))
    config.cache_dir.set(*dir, SettingSource::environment);
  if (auto dirs = non_empty("SPECJIT_CACHE_READONLY_DIRS")) {
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::StringRef(*dirs).split(parts, ':', -1, /*KeepEmpty=*/false);
    std::vector<std::string> list(parts.begin(), parts.end());
    config.readonly_dirs.set(std::move(list), SettingSource::environment);
  }
  if (auto log = non_empty("SPECJIT_LOG"))
    config.log.set(*log, SettingSource::environment);
  if (auto strict = non_empty("SPECJIT_STRICT")) {
    auto mode = parse_strict_mode(*strict);
    if (!mode)
      return bad_variable("SPECJIT_STRICT", mode.takeError());
    config.strict.set(*mode, SettingSource::environment);
  }
  if (auto arch = non_empty("SPECJIT_ARCH")) {
    auto parsed = Arch::parse(*arch);
    if (!parsed)
      return bad_variable("SPECJIT_ARCH", parsed.takeError());
    config.arch.set(*parsed, SettingSource::environment);
  }
  if (auto size = non_empty("SPECJIT_CACHE_MAX_SIZE")) {
    auto parsed = parse_size(*size);
    if (!parsed)
      return bad_variable("SPECJIT_CACHE_MAX_SIZE", parsed.takeError());
    config.max_cache_bytes.set(*parsed, SettingSource::environment);
  }
  if (auto err = read_integer(non_empty, "SPECJIT_STORM_THRESHOLD", config.storm_threshold,
                              int64_t{1}))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_LOCK_TIMEOUT_MS", config.lock_timeout_ms,
                              int64_t{0}))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_DEVICE", config.device, int64_t{0}))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_STALE_TEMP_SECONDS", config.stale_temp_seconds,
                              int64_t{1}))
    return err;
  return config;
}

std::vector<std::string> Config::cuda_include_dirs() const {
  return {cuda_home + "/include/cccl", cuda_home + "/include"};
}

std::string Config::cache_root() const {
  if (!cache_dir.value.empty())
    return cache_dir.value;
  if (!xdg_cache_home.empty())
    return xdg_cache_home + "/specjit";
  if (!home.empty())
    return home + "/.cache/specjit";
  return "/tmp/specjit-cache";
}

std::optional<std::string> Config::log_path() const {
  if (log.value == "off")
    return std::nullopt;
  if (!log.value.empty())
    return log.value;
  return cache_root() + "/logs/events.jsonl";
}

std::vector<Config::Row> Config::describe() const {
  auto strict_name = [](StrictMode mode) -> std::string {
    switch (mode) {
    case StrictMode::off: return "off";
    case StrictMode::warn: return "warn";
    case StrictMode::error: return "error";
    }
    return "off";
  };
  std::optional<std::string> log_target = log_path();
  return {
      {"cache_dir", "SPECJIT_CACHE_DIR", cache_root(), cache_dir.source},
      {"readonly_dirs", "SPECJIT_CACHE_READONLY_DIRS",
       fmt::format("{}", fmt::join(readonly_dirs.value, ":")), readonly_dirs.source},
      {"log", "SPECJIT_LOG", log_target ? *log_target : "off", log.source},
      {"strict", "SPECJIT_STRICT", strict_name(strict.value), strict.source},
      {"arch", "SPECJIT_ARCH", default_arch().name() + (arch.value ? "" : " (when no device)"),
       arch.source},
      {"storm_threshold", "SPECJIT_STORM_THRESHOLD", std::to_string(storm_threshold.value),
       storm_threshold.source},
      {"lock_timeout_ms", "SPECJIT_LOCK_TIMEOUT_MS", std::to_string(lock_timeout_ms.value),
       lock_timeout_ms.source},
      {"max_cache_bytes", "SPECJIT_CACHE_MAX_SIZE",
       max_cache_bytes.value == 0 ? "unlimited" : std::to_string(max_cache_bytes.value),
       max_cache_bytes.source},
      {"device", "SPECJIT_DEVICE", std::to_string(device.value), device.source},
      {"stale_temp_seconds", "SPECJIT_STALE_TEMP_SECONDS",
       std::to_string(stale_temp_seconds.value), stale_temp_seconds.source},
  };
}

} // namespace specjit
