// Every setting specjit has, with its value and where the value came from.
// This is the only place that reads the environment; every other component takes a
// `const Config&`. Precedence: API > CLI flag > SPECJIT_* variable > default.
#pragma once

#include "support/arch.h"

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

// Parses "1024", "64K", "512M", "10G" (binary units). Errors name the text.
llvm::Expected<uint64_t> parse_size(llvm::StringRef text);
llvm::Expected<StrictMode> parse_strict_mode(llvm::StringRef text);

} // namespace specjit
