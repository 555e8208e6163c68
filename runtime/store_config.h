// The disk store's options as the configuration sets them: the one mapping from Config to
// cache::StoreOptions, shared by the engine, the CLI and the tests.
#pragma once

#include "cache/disk_store.h"
#include "support/config.h"

namespace specjit::runtime {

cache::StoreOptions store_options(const Config& config);

} // namespace specjit::runtime
