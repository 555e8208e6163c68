#include "runtime/store_config.h"

namespace specjit::runtime {

cache::StoreOptions store_options(const Config& config) {
  cache::StoreOptions options;
  options.root = config.cache_root();
  options.readonly_layers = config.readonly_dirs.value;
  options.max_bytes = config.max_cache_bytes.value;
  options.stale_temp_seconds = config.stale_temp_seconds.value;
  options.lock_timeout_ms = config.lock_timeout_ms.value;
  options.trust_key_file = config.trust_key_file.value;
  return options;
}

} // namespace specjit::runtime
