// Every setting specjit has, with its value and where the value came from.
// This is the only place that reads the environment; every other component takes a
// `const Config&`. Precedence: API > CLI flag > SPECJIT_* variable > default.
#pragma once

#include "support/arch.h"
#include "support/remote_url.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specjit {

enum class SettingSource { default_value, environment, cli_flag, api };
llvm::StringRef setting_source_name(SettingSource source);

enum class StrictMode { off, warn, error };

template <typename T> struct Setting {
  T value{};
  SettingSource source = SettingSource::default_value;

  void set(T new_value, SettingSource from) {
    value = std::move(new_value);
    source = from;
  }
};

struct Config {
  Setting<std::string> cache_dir;                  // SPECJIT_CACHE_DIR; empty: derived
  Setting<std::vector<std::string>> readonly_dirs; // SPECJIT_CACHE_READONLY_DIRS (a:b:c)
  Setting<std::string> log;                        // SPECJIT_LOG: a path, "off"; empty: default
  Setting<StrictMode> strict;                      // SPECJIT_STRICT: warn | error
  Setting<std::optional<Arch>> arch;               // SPECJIT_ARCH: target when no device decides
  Setting<int64_t> storm_threshold{8};             // SPECJIT_STORM_THRESHOLD
  Setting<int64_t> lock_timeout_ms{10000};         // SPECJIT_LOCK_TIMEOUT_MS
  Setting<uint64_t> max_cache_bytes{0};            // SPECJIT_CACHE_MAX_SIZE (e.g. 10G); 0: none
  Setting<int64_t> device{0};                      // SPECJIT_DEVICE: CUDA device ordinal
  Setting<int64_t> stale_temp_seconds{3600};       // SPECJIT_STALE_TEMP_SECONDS
  // SPECJIT_TRUST_KEY_FILE: the operator's key for entry tags (cache/entry_auth.h); only the
  // path is kept here, the key is read by the cache and never shown.
  Setting<std::string> trust_key_file;
  Setting<uint64_t> log_max_bytes{64ull << 20};    // SPECJIT_LOG_MAX_SIZE: rotate past this
  Setting<std::optional<RemoteUrl>> remote;        // SPECJIT_REMOTE (remote_url.h); none: off
  Setting<std::string> remote_password_file;       // SPECJIT_REMOTE_PASSWORD_FILE
  // Facts of the environment used to derive defaults, not settings of their own.
  std::string xdg_cache_home;
  std::string home;
  std::string cuda_home; // SPECJIT_CUDA_HOME > CUDA_HOME > /usr/local/cuda
  // SPECJIT_CUTLASS_INCLUDE: a CUTLASS/CuTe include tree (tests and benches); empty: none.
  std::string cutlass_include;

  using Lookup = llvm::function_ref<std::optional<std::string>(llvm::StringRef name)>;
  // Reads the process environment. A malformed variable is an error naming it.
  static llvm::Expected<Config> from_environment();
  // The same, from any lookup (tests pass a map).
  static llvm::Expected<Config> from_lookup(Lookup lookup);
  // The environment with some variables given by the API (the C ABI's specjit_settings):
  // `overrides` answers first; its settings are marked SettingSource::api.
  static llvm::Expected<Config> from_environment(Lookup overrides);

  // The writable root: cache_dir > $XDG_CACHE_HOME/specjit > $HOME/.cache/specjit.
  std::string cache_root() const;
  // The toolkit's header trees, in search order: CCCL (<cub/...>, <cuda/std/...>), then the
  // toolkit's own headers. For KernelDef::include_dirs.
  std::vector<std::string> cuda_include_dirs() const;
  // Where the recompilation log goes; nullopt when logging is off.
  std::optional<std::string> log_path() const;
  // The architecture to compile for when no device is present.
  Arch default_arch() const { return arch.value.value_or(Arch{}); }

  struct Row {
    std::string name;
    std::string variable;
    std::string value;
    SettingSource source;
  };
  std::vector<Row> describe() const;
};

// The accepted range of every integer setting; a value outside it (or one that overflows) is
// an error naming the variable and the range, never a silent clamp.
struct IntegerRange {
  int64_t minimum;
  int64_t maximum;
};
inline constexpr IntegerRange k_storm_threshold_range{1, 1'000'000};
inline constexpr IntegerRange k_lock_timeout_ms_range{0, 86'400'000}; // a day
inline constexpr IntegerRange k_device_range{0, 1023};
inline constexpr IntegerRange k_stale_temp_seconds_range{1, 31'622'400}; // 366 days
inline constexpr uint64_t k_max_cache_size_limit = 1ull << 50;          // 1024T
inline constexpr uint64_t k_min_log_max_size = 64ull << 10;             // 64K
inline constexpr uint64_t k_max_log_max_size = 1ull << 40;              // 1T
inline constexpr IntegerRange k_jobs_range{1, 1024};                    // precompile -j

// Parses "1024", "64K", "512M", "10G" (binary units). Errors name the text; a number that
// does not fit in 64 bits is an error, never a wrapped value.
llvm::Expected<uint64_t> parse_size(llvm::StringRef text);
// Parses a decimal integer within `range`. `name` (a variable or a flag) leads the error:
// "SPECJIT_DEVICE: '99999' is out of range; expected an integer in [0, 1023]".
llvm::Expected<int64_t> parse_integer_in(llvm::StringRef name, llvm::StringRef text,
                                         IntegerRange range);
llvm::Expected<StrictMode> parse_strict_mode(llvm::StringRef text);

} // namespace specjit
