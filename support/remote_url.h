// SPECJIT_REMOTE: where the fleet's shared cache lives and how patient to be with it.
//
//   redis://[:PASSWORD@]HOST[:PORT][/DB][?NAME=VALUE&...]
//
// NAME is one of connect_timeout_ms (default 100), op_timeout_ms (500), backoff_ms (30000),
// lock_ttl_ms (60000), max_value_bytes (256M) or mode (rw | ro, default rw). PORT defaults to
// 6379, DB to 0. A password in the URL or in SPECJIT_REMOTE_PASSWORD_FILE is never printed:
// redacted() is the form every message and `specjit config` show.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>

namespace specjit {

enum class RemoteMode { read_write, read_only };

struct RemoteUrl {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string password; // from the URL; empty: none (or the password file's)
  int64_t connect_timeout_ms = 100;
  int64_t op_timeout_ms = 500;
  int64_t backoff_ms = 30000;
  int64_t lock_ttl_ms = 60000;
  uint64_t max_value_bytes = 256ull << 20;
  RemoteMode mode = RemoteMode::read_write;

  bool read_only() const { return mode == RemoteMode::read_only; }
  // The URL with the password replaced by "***" and every parameter spelled out.
  std::string redacted() const;
};

// Errors name the part of the URL that is wrong, never the password.
llvm::Expected<RemoteUrl> parse_remote_url(llvm::StringRef text);

} // namespace specjit
