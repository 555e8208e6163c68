// Pushing the root's entries to the fleet tier: `specjit remote push` and `precompile --push`.
#pragma once

#include "cli.h"

#include "cache/remote_store.h"

namespace specjit::cli {

struct PushResult {
  int64_t pushed = 0;  // newly stored
  int64_t present = 0; // already there (never overwritten)
  int64_t skipped = 0; // local entries that do not verify
  int64_t failed = 0;  // the remote refused or failed
  std::string first_failure;
};

// Every verified entry of the root and layers, stored under its key unless one is there.
PushResult push_local_entries(Context& context, cache::RemoteStore& remote);
llvm::json::Object to_json(const PushResult& result);

// The configured remote for a command that writes to it; an error names why not.
llvm::Expected<std::unique_ptr<cache::RemoteStore>> writable_remote(const Context& context);

} // namespace specjit::cli
