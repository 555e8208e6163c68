// A Config for tests: everything under one temporary directory, nothing from the environment.
#pragma once

#include "test_support.h"

#include "support/config.h"

#include <doctest/doctest.h>

#include <map>

namespace specjit::test {

inline Config make_config(const std::map<std::string, std::string>& variables) {
  auto config = Config::from_lookup([&](llvm::StringRef name) -> std::optional<std::string> {
    auto it = variables.find(name.str());
    if (it == variables.end())
      return std::nullopt;
    return it->second;
  });
  REQUIRE_MESSAGE(static_cast<bool>(config), llvm::toString(config.takeError()));
  return std::move(*config);
}

// Cache root <dir>/cache, log <dir>/events.jsonl, target sm_90a.
inline Config config_in(const TempDir& dir, std::map<std::string, std::string> extra = {}) {
  extra.emplace("SPECJIT_CACHE_DIR", dir / "cache");
  extra.emplace("SPECJIT_LOG", dir / "events.jsonl");
  extra.emplace("SPECJIT_ARCH", "sm_90a");
  return make_config(extra);
}

} // namespace specjit::test
