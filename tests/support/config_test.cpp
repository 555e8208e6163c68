#include "support/config.h"

#include <doctest/doctest.h>

#include <map>

using namespace specjit;

namespace {
llvm::Expected<Config> config_from(const std::map<std::string, std::string>& variables) {
  return Config::from_lookup([&](llvm::StringRef name) -> std::optional<std::string> {
    auto it = variables.find(name.str());
    if (it == variables.end())
      return std::nullopt;
    return it->second;
  });
}
} // namespace

TEST_CASE("the cache root follows the precedence API > SPECJIT_CACHE_DIR > XDG > HOME") {
  auto home_only = config_from({{"HOME", "/home/u"}});
  REQUIRE(static_cast<bool>(home_only));
  CHECK(home_only->cache_root() == "/home/u/.cache/specjit");
  auto xdg = config_from({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
  CHECK(xdg->cache_root() == "/xdg/specjit");
  auto env = config_from({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"},
                          {"SPECJIT_CACHE_DIR", "/env/cache"}});
  CHECK(env->cache_root() == "/env/cache");
  CHECK(env->cache_dir.source == SettingSource::environment);
  env->cache_dir.set("/api/cache", SettingSource::api);
  CHECK(env->cache_root() == "/api/cache");
}

TEST_CASE("an empty variable is the same as an unset one") {
  auto empty = config_from({{"HOME", "/h"}, {"SPECJIT_CACHE_DIR", ""}, {"SPECJIT_STRICT", ""}});
  REQUIRE(static_cast<bool>(empty));
  CHECK(empty->cache_root() == "/h/.cache/specjit");
  CHECK(empty->strict.value == StrictMode::off);
  CHECK(empty->strict.source == SettingSource::default_value);
}

TEST_CASE("settings parse from the environment and remember their source") {
  auto config = config_from({{"SPECJIT_CACHE_READONLY_DIRS", "/a:/b::/c"},
                             {"SPECJIT_STRICT", "error"},
                             {"SPECJIT_ARCH", "sm_90a"},
                             {"SPECJIT_CACHE_MAX_SIZE", "2G"},
                             {"SPECJIT_LOG", "off"},
                             {"SPECJIT_STORM_THRESHOLD", "3"}});
  REQUIRE(static_cast<bool>(config));
  CHECK(config->readonly_dirs.value == std::vector<std::string>{"/a", "/b", "/c"});
  CHECK(config->strict.value == StrictMode::error);
  CHECK(config->default_arch() == Arch{9, 0, true});
  CHECK(config->max_cache_bytes.value == 2ull << 30);
  CHECK_FALSE(config->log_path().has_value());
  CHECK(config->storm_threshold.value == 3);
  bool found = false;
  for (const Config::Row& row : config->describe())
    if (row.name == "strict") {
      found = true;
      CHECK(row.value == "error");
      CHECK(row.source == SettingSource::environment);
    }
  CHECK(found);
}

TEST_CASE("the log defaults to <cache root>/logs/events.jsonl") {
  auto config = config_from({{"SPECJIT_CACHE_DIR", "/c"}});
  CHECK(config->log_path() == std::optional<std::string>("/c/logs/events.jsonl"));
}

TEST_CASE("a malformed variable is an error naming it") {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"SPECJIT_STRICT", "maybe"},
           {"SPECJIT_ARCH", "hopper"},
           {"SPECJIT_CACHE_MAX_SIZE", "lots"},
           {"SPECJIT_STORM_THRESHOLD", "0"},
           {"SPECJIT_LOCK_TIMEOUT_MS", "-5"}}) {
    auto config = config_from({{name, value}});
    REQUIRE_FALSE(static_cast<bool>(config));
    std::string message = llvm::toString(config.takeError());
    CHECK_MESSAGE(message.find(name) != std::string::npos, message);
  }
}

TEST_CASE("sizes parse with binary units") {
  CHECK(*parse_size("0") == 0);
  CHECK(*parse_size("1024") == 1024);
  CHECK(*parse_size("64K") == 64 * 1024);
  CHECK(*parse_size("512m") == 512ull << 20);
  CHECK(*parse_size("10G") == 10ull << 30);
  auto bad = parse_size("ten");
  CHECK_FALSE(static_cast<bool>(bad));
  llvm::consumeError(bad.takeError());
}

namespace {
std::string error_of(const std::map<std::string, std::string>& variables) {
  auto config = config_from(variables);
  if (config)
    return "";
  return llvm::toString(config.takeError());
}
} // namespace

TEST_CASE("an integer setting out of its range is an error naming the variable and the range") {
  CHECK(error_of({{"SPECJIT_LOCK_TIMEOUT_MS", "99999999999999999999"}}) ==
        "SPECJIT_LOCK_TIMEOUT_MS: '99999999999999999999' is out of range; expected an integer "
        "in [0, 86400000]");
  CHECK(error_of({{"SPECJIT_LOCK_TIMEOUT_MS", "86400001"}}).find("[0, 86400000]") !=
        std::string::npos);
  CHECK(error_of({{"SPECJIT_DEVICE", "4096"}}).find("SPECJIT_DEVICE: '4096' is out of range") == 0);
  CHECK(error_of({{"SPECJIT_DEVICE", "-1"}}).find("[0, 1023]") != std::string::npos);
  CHECK(error_of({{"SPECJIT_STORM_THRESHOLD", "0"}}).find("[1, 1000000]") != std::string::npos);
  CHECK(error_of({{"SPECJIT_STALE_TEMP_SECONDS", "9223372036854775808"}})
            .find("SPECJIT_STALE_TEMP_SECONDS") == 0);
  CHECK(error_of({{"SPECJIT_DEVICE", "two"}}) ==
        "SPECJIT_DEVICE: 'two' is not an integer; expected one in [0, 1023]");
  CHECK(error_of({{"SPECJIT_LOCK_TIMEOUT_MS", "86400000"}, {"SPECJIT_DEVICE", "1023"}}) == "");
}

TEST_CASE("a size setting that overflows 64 bits or leaves its range is an error, never unlimited") {
  std::string overflow = error_of({{"SPECJIT_CACHE_MAX_SIZE", "17179869184G"}});
  CHECK(overflow.find("SPECJIT_CACHE_MAX_SIZE") == 0);
  CHECK(overflow.find("does not fit in 64 bits") != std::string::npos);
  CHECK(error_of({{"SPECJIT_CACHE_MAX_SIZE", "99999999999999999999"}}).find("SPECJIT_CACHE_MAX_SIZE") ==
        0);
  CHECK(error_of({{"SPECJIT_CACHE_MAX_SIZE", "2048T"}}).find("out of range") != std::string::npos);
  CHECK(error_of({{"SPECJIT_LOG_MAX_SIZE", "1K"}}).find("SPECJIT_LOG_MAX_SIZE: '1K' is out of range") ==
        0);
  auto config = config_from({{"SPECJIT_LOG_MAX_SIZE", "1M"}, {"SPECJIT_CACHE_MAX_SIZE", "0"}});
  REQUIRE(static_cast<bool>(config));
  CHECK(config->log_max_bytes.value == 1u << 20);
  CHECK(config->max_cache_bytes.value == 0);
  CHECK(config_from({})->log_max_bytes.value == 64u << 20);
}

TEST_CASE("parse_integer_in names a flag the same way") {
  auto jobs = parse_integer_in("-j", "100000", k_jobs_range);
  REQUIRE_FALSE(static_cast<bool>(jobs));
  CHECK(llvm::toString(jobs.takeError()) ==
        "-j: '100000' is out of range; expected an integer in [1, 1024]");
  CHECK(*parse_integer_in("-j", " 8 ", k_jobs_range) == 8);
}
