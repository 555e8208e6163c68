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
  if (number > UINT64_MAX / unit)
    return make_error(Errc::invalid_argument, "'{}' does not fit in 64 bits", text.str());
  return number * unit;
}

llvm::Expected<int64_t> parse_integer_in(llvm::StringRef name, llvm::StringRef text,
                                         IntegerRange range) {
  int64_t value = 0;
  llvm::StringRef digits = text.trim();
  bool malformed = digits.getAsInteger(10, value);
  // getAsInteger fails on overflow too: tell that apart from a word.
  bool numeric = !digits.empty() && digits.ltrim("-").find_first_not_of("0123456789") ==
                                         llvm::StringRef::npos;
  if (malformed && !numeric)
    return make_error(Errc::invalid_argument, "{}: '{}' is not an integer; expected one in [{}, {}]",
                      name.str(), text.str(), range.minimum, range.maximum);
  if (malformed || value < range.minimum || value > range.maximum)
    return make_error(Errc::invalid_argument,
                      "{}: '{}' is out of range; expected an integer in [{}, {}]", name.str(),
                      text.str(), range.minimum, range.maximum);
  return value;
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

llvm::Error read_integer(Config::Lookup lookup, llvm::StringRef name, Setting<int64_t>& setting,
                         IntegerRange range) {
  std::optional<std::string> text = lookup(name);
  if (!text)
    return llvm::Error::success();
  auto value = parse_integer_in(name, *text, range);
  if (!value)
    return value.takeError();
  setting.set(*value, SettingSource::environment);
  return llvm::Error::success();
}

llvm::Error read_size(Config::Lookup lookup, llvm::StringRef name, Setting<uint64_t>& setting,
                      uint64_t minimum, uint64_t maximum) {
  std::optional<std::string> text = lookup(name);
  if (!text)
    return llvm::Error::success();
  auto parsed = parse_size(*text);
  if (!parsed)
    return bad_variable(name, parsed.takeError());
  if (*parsed < minimum || *parsed > maximum)
    return make_error(Errc::invalid_argument, "{}: '{}' is out of range; expected a size in [{}, {}] "
                      "bytes", name.str(), *text, minimum, maximum);
  setting.set(*parsed, SettingSource::environment);
  return llvm::Error::success();
}

// The fleet tier: the URL is checked here; the password file is read when connecting.
llvm::Error read_remote(Config::Lookup lookup, Config& config) {
  if (auto text = lookup("SPECJIT_REMOTE")) {
    auto url = parse_remote_url(*text);
    if (!url)
      return bad_variable("SPECJIT_REMOTE", url.takeError());
    config.remote.set(std::move(*url), SettingSource::environment);
  }
  if (auto file = lookup("SPECJIT_REMOTE_PASSWORD_FILE"))
    config.remote_password_file.set(*file, SettingSource::environment);
  return llvm::Error::success();
}

} // namespace

namespace {
std::optional<std::string> environment_variable(llvm::StringRef name) {
  // The one getenv in specjit.
  const char* value = std::getenv(name.str().c_str());
  if (value == nullptr)
    return std::nullopt;
  return std::string(value);
}
} // namespace

llvm::Expected<Config> Config::from_environment() { return from_lookup(environment_variable); }

llvm::Expected<Config> Config::from_environment(Lookup overrides) {
  auto config = from_lookup([&](llvm::StringRef name) {
    std::optional<std::string> value = overrides(name);
    return value ? value : environment_variable(name);
  });
  if (!config)
    return config.takeError();
  auto mark = [&](llvm::StringRef variable, SettingSource& source) {
    if (overrides(variable))
      source = SettingSource::api;
  };
  mark("SPECJIT_CACHE_DIR", config->cache_dir.source);
  mark("SPECJIT_CACHE_READONLY_DIRS", config->readonly_dirs.source);
  mark("SPECJIT_LOG", config->log.source);
  mark("SPECJIT_STRICT", config->strict.source);
  mark("SPECJIT_ARCH", config->arch.source);
  mark("SPECJIT_STORM_THRESHOLD", config->storm_threshold.source);
  mark("SPECJIT_LOCK_TIMEOUT_MS", config->lock_timeout_ms.source);
  mark("SPECJIT_CACHE_MAX_SIZE", config->max_cache_bytes.source);
  mark("SPECJIT_DEVICE", config->device.source);
  mark("SPECJIT_STALE_TEMP_SECONDS", config->stale_temp_seconds.source);
  return config;
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
  if (auto key_file = non_empty("SPECJIT_TRUST_KEY_FILE"))
    config.trust_key_file.set(*key_file, SettingSource::environment);
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
  if (auto err = read_size(non_empty, "SPECJIT_CACHE_MAX_SIZE", config.max_cache_bytes, 0,
                           k_max_cache_size_limit))
    return err;
  if (auto err = read_size(non_empty, "SPECJIT_LOG_MAX_SIZE", config.log_max_bytes,
                           k_min_log_max_size, k_max_log_max_size))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_STORM_THRESHOLD", config.storm_threshold,
                              k_storm_threshold_range))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_LOCK_TIMEOUT_MS", config.lock_timeout_ms,
                              k_lock_timeout_ms_range))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_DEVICE", config.device, k_device_range))
    return err;
  if (auto err = read_integer(non_empty, "SPECJIT_STALE_TEMP_SECONDS", config.stale_temp_seconds,
                              k_stale_temp_seconds_range))
    return err;
  if (auto err = read_remote(non_empty, config))
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
      {"trust_key_file", "SPECJIT_TRUST_KEY_FILE",
       trust_key_file.value.empty() ? "unset" : "set (" + trust_key_file.value + ")",
       trust_key_file.source},
      {"log_max_bytes", "SPECJIT_LOG_MAX_SIZE", std::to_string(log_max_bytes.value),
       log_max_bytes.source},
      {"remote", "SPECJIT_REMOTE", remote.value ? remote.value->redacted() : "off", remote.source},
      {"remote_password_file", "SPECJIT_REMOTE_PASSWORD_FILE", remote_password_file.value,
       remote_password_file.source},
  };
}

} // namespace specjit
