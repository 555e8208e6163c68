// Publishes entries into a DiskStore's root on one background thread, without fsync
// (Durability::relaxed): for copies of bytes that are kept elsewhere (an entry fetched from the
// remote), so that the request that fetched them waits neither for the disk nor for the file
// system's metadata updates. docs/fleet.md, "Durability of fetched entries".
//
// Contract: every entry queued is published (or has its failure reported) before the
// destructor returns: it drains the queue, then joins. Until then a reader may not find the
// copy yet (a miss it serves from elsewhere). A failure goes to the entry's handler, on the
// writer thread. The thread starts with the first entry: a publisher never used costs nothing.
// A process forked from one whose writer runs has no writer: its entries are published inline
// and the parent's queue is left to the parent. Thread-safe.
#pragma once

#include "cache/disk_store.h"

#include <functional>
#include <memory>
#include <string>

namespace specjit::cache {

class AsyncPublisher {
public:
  // `path`: where the entry would have gone; `error`: why it did not.
  using FailureHandler = std::function<void(const std::string& path, llvm::Error error)>;

  struct Job {
    Digest128 key;
    std::string kernel;
    std::shared_ptr<const std::string> owner; // keeps `bytes` alive until it is published
    llvm::StringRef bytes;                    // the encoded entry, inside *owner
    FailureHandler on_failure;                // may be empty
  };

  explicit AsyncPublisher(DiskStore& store);
  ~AsyncPublisher();
  AsyncPublisher(const AsyncPublisher&) = delete;
  AsyncPublisher& operator=(const AsyncPublisher&) = delete;

  // Queues the entry (nothing when the root is not writable).
  void enqueue(Job job);
  // Waits until every entry queued so far is published.
  void drain();

private:
  struct State;
  void run();
  void publish(Job& job);
  bool forked_away() const;

  DiskStore& m_store;
  // The queue, its lock and the thread. A forked child abandons it as it is: destroying a
  // condition variable the parent's thread waits on, or a thread it does not have, would hang.
  std::unique_ptr<State> m_state;
};

} // namespace specjit::cache
