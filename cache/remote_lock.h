// Fleet-wide single flight: before compiling a key, a node takes specjit:v1:lock:<key> in Redis
// (SET NX PX: a random token, an expiry of lock_ttl_ms). Only the holder's token releases it
// (compare-and-delete on the server), so a holder that outlived its expiry never frees a lock a
// successor took. Others poll for the entry with back-off (5 ms, doubling, at most 100 ms)
// while the lock exists, for at most lock_ttl_ms a holder (the wait restarts when the lock
// changes hands): a holder that dies costs its expiry, nothing more. Like the host lock
// (disk_store.h) it is an optimisation only: any remote failure ends the wait at once, and the
// caller compiles.
#pragma once

#include "cache/remote_store.h"
#include "support/hash.h"

#include <optional>
#include <string>

namespace specjit::cache {

class FleetLock {
public:
  FleetLock() = default;
  FleetLock(RemoteStore& store, std::string name, std::string token)
      : m_store(&store), m_name(std::move(name)), m_token(std::move(token)) {}
  FleetLock(FleetLock&& other) noexcept;
  FleetLock& operator=(FleetLock&& other) noexcept;
  ~FleetLock() { release(); }
  bool held() const { return m_store != nullptr; }
  // Deletes the lock if it still holds this token. Idempotent; failures are ignored (the
  // expiry frees it).
  void release();

private:
  RemoteStore* m_store = nullptr;
  std::string m_name;
  std::string m_token;
};

struct FleetWait {
  FleetLock lock;                   // held: this node compiles, publishes, then releases
  std::optional<std::string> value; // another node published: the raw value, still unverified
  bool contended = false;           // another node held the lock when this one asked
  int64_t waited_ms = 0;            // time spent waiting on another node's lock
};

// Takes the key's lock, or waits for the entry another node is compiling (see above). Neither
// held nor a value: compile without the fleet lock (the remote failed or the wait ran out).
FleetWait acquire_or_wait(RemoteStore& store, const Digest128& key);

// 128 random bits and the pid, as text: unique across the fleet.
std::string new_lock_token();

} // namespace specjit::cache
