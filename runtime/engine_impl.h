// The Engine's private state, shared by its files: engine.cpp (life, registry, counters),
// engine_memory.cpp (memory tier), engine_device.cpp (device, context, loading),
// engine_launch.cpp (launches), resolve.cpp and resolve_deps.cpp (disk and compile tiers). Not
// part of the public API.
#pragma once

#include "runtime/engine.h"
#include "runtime/event_log.h"
#include "runtime/header_deps.h"
#include "runtime/kernel_source.h"
#include "runtime/remote_tier.h"
#include "runtime/stored_failure.h"
#include "runtime/variant_key.h"

#include "cache/disk_store.h"
#include "support/error.h"

#include <llvm/ADT/DenseMap.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <tuple>

namespace specjit::runtime {

// A variant this process knows of (from disk or its own compiles), for explaining misses.
struct KnownVariant {
  cache::CacheKeyInputs inputs;
  llvm::json::Object variant;
};

struct KernelState {
  // The launch path's view of the policies (make_key): one cache line, not the definition's.
  uint32_t param_count = 0;
  std::array<PolicyKind, k_max_params> kinds{};
  std::array<uint32_t, k_max_params> enum_sizes{}; // an enum parameter's value count; 0: none
  KernelDef def;
  PreparedSource prepared;
  Digest128 source_digest;
  std::mutex mutex; // guards everything below
  bool index_loaded = false;
  std::vector<KnownVariant> known;
  std::map<std::string, std::set<int64_t>> exact_values; // per exact parameter
  std::set<std::string> storm_reported;
  // Definitions with include directories (runtime/resolve_deps.cpp): the source digest is
  // settled once a stored dependency set holds or a compile traced one; until then
  // source_digest is the definition digest. header_change: why the newest stored set failed.
  bool deps_settled = false;
  bool deps_checked = false;
  cache::DependencySet deps;
  std::optional<HeaderChange> header_change;
};

// One variant's place in the memory tier. The first requester resolves it; the others wait.
// The launch path reads `state`, `loaded` and the variant's launch fields: they come first, in
// the slot's first cache line.
struct alignas(64) Slot {
  enum class State { pending, ready, failed };
  std::atomic<State> state{State::pending}; // read without `mutex` on the hot path
  std::atomic<bool> loaded{false};          // module loaded; set once under `mutex`
  Variant variant;
  std::mutex mutex;
  std::condition_variable changed;
  StoredFailure failure; // for the callers that waited for it
};

struct Counters {
  std::atomic<uint64_t> memory_hits{0}, disk_hits{0}, remote_hits{0}, compiles{0}, failures{0},
      corrupt_entries{0}, write_failures{0}, storms{0};
  std::atomic<uint64_t> lock_waits{0}, lock_wait_us_total{0}, lock_wait_us_max{0};
  std::atomic<uint64_t> headers_hashed{0}, headers_from_hints{0};
  // One take of a key's compile lock: `waited` when another process held it (it published the
  // key meanwhile) or the take gave up.
  void note_lock_take(std::chrono::steady_clock::duration took, bool waited) {
    const auto us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    if (waited)
      lock_waits.fetch_add(1, std::memory_order_relaxed);
    lock_wait_us_total.fetch_add(us, std::memory_order_relaxed);
    for (uint64_t max = lock_wait_us_max.load(); us > max;)
      if (lock_wait_us_max.compare_exchange_weak(max, us))
        break;
  }
};

inline constexpr size_t k_max_kernels = 1024;

struct alignas(64) Engine::Impl {
  explicit Impl(const Config& config);

  // The launch path's fields first, in one cache line: the instance (the thread caches'
  // check), the context, the counters (memory_hits first).
  uint64_t instance_id;
  std::atomic<CUcontext> context{nullptr};
  Counters counters;
  Config config;
  cache::DiskStore store;
  EventLog log;
  std::unique_ptr<RemoteTier> remote; // the fleet tier; nullptr: none configured
  std::atomic<bool> sealed{false};

  std::mutex kernels_mutex; // serializes add_kernel; readers index the array directly
  std::array<std::unique_ptr<KernelState>, k_max_kernels> kernels;
  std::atomic<uint32_t> kernel_count{0};

  std::shared_mutex slots_mutex;
  llvm::DenseMap<VariantKey, std::shared_ptr<Slot>> slots;

  std::once_flag arch_once;
  Arch target_arch;
  std::once_flag facts_once;
  DeviceFacts facts;

  // Engine::resident_ctas, by (variant key, threads, shared bytes).
  struct OccupancyKey {
    Digest128 key;
    unsigned threads = 0, shared_bytes = 0;
    friend bool operator<(const OccupancyKey& a, const OccupancyKey& b) {
      return std::tie(a.key.high, a.key.low, a.threads, a.shared_bytes) <
             std::tie(b.key.high, b.key.low, b.threads, b.shared_bytes);
    }
  };
  std::shared_mutex occupancy_mutex;
  std::map<OccupancyKey, unsigned> occupancy;

  std::mutex context_mutex; // serializes retaining the primary context

  KernelState& kernel(KernelId id) { return *kernels[id.index]; }
  // The memory tier: the slot for these values, resolved (by this thread or another).
  llvm::Expected<Slot*> specialize_and_find(KernelId kernel, llvm::ArrayRef<int64_t> values);
  // The memory-tier key for these values into a default-constructed `key`; false (and `error`
  // set) when a value does not fit.
  bool make_key(KernelId kernel, llvm::ArrayRef<int64_t> values, VariantKey& key,
                llvm::Error* error);
  // The slot when it is in the memory tier and ready; nullptr otherwise. Never waits.
  Slot* find_ready(const VariantKey& key);
  llvm::Expected<Slot*> find_or_resolve(const VariantKey& key);
  Arch arch();
  const DeviceFacts& device_facts();
  // The slow path (resolve.cpp): disk layers, then compile. Fills slot.variant.
  llvm::Error resolve(KernelState& kernel, llvm::ArrayRef<SpecValue> specs, Variant& out);
  llvm::Error load(Slot& slot);
  // Direct mode (resolve_deps.cpp). The settled source digest, checking the stored dependency
  // sets once per process (again with look_again, after taking the compile lock); nullopt
  // while none holds.
  std::optional<Digest128> settled_source_digest(KernelState& kernel, bool look_again);
  // Settles the definition on what a compile read; returns the source digest it gives.
  llvm::Expected<Digest128> record_dependencies(KernelState& kernel,
                                                llvm::ArrayRef<std::string> included_files);
  llvm::Error publish_dependencies(KernelState& kernel);
  // The engine's context current on this thread: a thread-local compare on the launch path
  // (inline, below).
  llvm::Error ensure_context();
  [[gnu::cold]] llvm::Error make_context_current_slow(); // retains the primary context, sets it current
};

// The context this thread made current last (engine_device.cpp). Initial-exec, as the launch
// path's other thread-locals (engine_memory.cpp says why); __thread, never initialized
// dynamically, so that files other than its own read it without a TLS wrapper call.
[[gnu::tls_model("initial-exec")]] extern __thread CUcontext t_current_context;

inline llvm::Error Engine::Impl::ensure_context() {
  // The launch path: this thread already made the engine's context current. (Serving runtimes
  // share the device's primary context, so switching back is rare.)
  CUcontext ctx = context.load(std::memory_order_acquire);
  if (ctx != nullptr && t_current_context == ctx) [[likely]]
    return llvm::Error::success();
  return make_context_current_slow();
}

} // namespace specjit::runtime
