// The engine's fleet tier (docs/fleet.md): the configured Redis after the local layers.
// A local miss fetches; a fetched value is verified exactly as a local entry
// (cache/remote_value.h) and used at once; its copy in the writable root is written off the
// request path, without fsync (cache/async_publisher.h; complete when the tier is destroyed,
// a copy torn by a crash is a miss fetched again). A compile is preceded by the
// fleet lock (cache/remote_lock.h) and followed by a push. Read-only mode fetches only: no
// lock, no wait, no push. Every fault of the remote is a miss plus a log event:
//   remote_hit {ms, layer: "remote"}, remote_corrupt {detail}, remote_write_failed {detail},
//   remote_wait {ms, outcome}, remote_down {remote, detail, backoff_ms}, remote_up {remote}.
#pragma once

#include "runtime/event_log.h"

#include "cache/async_publisher.h"
#include "cache/disk_store.h"
#include "cache/remote_lock.h"
#include "cache/remote_value.h"
#include "support/config.h"

#include <memory>
#include <optional>

namespace specjit::runtime {

struct RemoteEntry {
  std::shared_ptr<const std::string> value; // the remote value as fetched
  cache::DecodedEntry entry;                // verified; views into *value
};

class RemoteTier {
public:
  // `local`: the root fetched entries are copied into (when writable); it outlives the tier.
  // trust_key_file: the operator's key (empty: none); with one, values are tagged when pushed
  // and refused without a valid tag when fetched.
  RemoteTier(std::unique_ptr<cache::RemoteStore> store, cache::DiskStore& local, EventLog& log,
             const std::string& trust_key_file = {});

  bool read_only() const { return m_store->url().read_only(); }
  cache::RemoteStore& store() { return *m_store; }

  // A verified entry (its local copy queued when the root is writable), or nullopt: a miss,
  // an unavailable remote or a bad value (logged). `base`: the request's event fields.
  std::optional<RemoteEntry> fetch(const Digest128& key, const llvm::json::Object& base);

  struct Flight {
    cache::FleetLock lock;            // held: compile, push, then let it go
    std::optional<RemoteEntry> entry; // another node compiled it meanwhile
  };
  // Takes the fleet lock or waits for the node that holds it (read-only: neither).
  Flight single_flight(const Digest128& key, const llvm::json::Object& base);

  // Publishes a compiled entry (read-only: nothing). Failures are logged, never returned.
  void push(const Digest128& key, llvm::StringRef entry_bytes, const llvm::json::Object& base);

private:
  std::optional<RemoteEntry> verify(const Digest128& key, std::string value,
                                    const llvm::json::Object& base, double ms);
  void write_event(const llvm::json::Object& base, llvm::StringRef name, llvm::json::Object extra);

  cache::RemoteTrust trust() const {
    return {m_trust_required, m_trust_key ? &*m_trust_key : nullptr};
  }

  std::unique_ptr<cache::RemoteStore> m_store;
  EventLog& m_log;
  bool m_trust_required = false;
  std::optional<cache::TrustKey> m_trust_key;
  cache::AsyncPublisher m_copies; // last: drained before the rest goes
};

// The configured remote, or nullptr when SPECJIT_REMOTE is unset or its password file cannot
// be read (said once on stderr: the engine then runs on its local layers).
std::unique_ptr<RemoteTier> open_remote_tier(const Config& config, cache::DiskStore& local,
                                             EventLog& log);
// The store alone, for the CLI: the same password handling, an error instead of a warning.
llvm::Expected<std::unique_ptr<cache::RemoteStore>>
open_remote_store(const Config& config, cache::RemoteListener listener = {});

} // namespace specjit::runtime
