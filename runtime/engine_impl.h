// The Engine's private state, shared by engine.cpp (memory tier, loading, launching) and
// resolve.cpp (disk and compile tiers). Not part of the public API.
#pragma once

#include "runtime/engine.h"
#include "runtime/event_log.h"
#include "runtime/variant_key.h"

#include "cache/disk_store.h"
#include "support/error.h"

#include <llvm/ADT/DenseMap.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>

namespace specjit::runtime {

// A variant this process knows of (from disk or its own compiles), for explaining misses.
struct KnownVariant {
  cache::CacheKeyInputs inputs;
  llvm::json::Object variant;
};

struct KernelState {
  KernelDef def;
  Digest128 source_digest;
  std::mutex mutex; // guards everything below
  bool index_loaded = false;
  std::vector<KnownVariant> known;
  std::map<std::string, std::set<int64_t>> exact_values; // per exact parameter
  std::set<std::string> storm_reported;
};

// One variant's place in the memory tier. The first requester resolves it; the others wait.
struct Slot {
  enum class State { pending, ready, failed };
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<State> state{State::pending}; // read without `mutex` on the hot path
  std::string failure;
  std::optional<Errc> failure_code; // the failure's kind, for the callers that waited for it
  Variant variant;
  std::atomic<bool> loaded{false}; // module loaded; set once under `mutex`
};

struct Counters {
  std::atomic<uint64_t> memory_hits{0}, disk_hits{0}, compiles{0}, failures{0},
      corrupt_entries{0}, write_failures{0}, storms{0};
};

inline constexpr size_t k_max_kernels = 1024;

struct Engine::Impl {
  explicit Impl(const Config& config);

  Config config;
  uint64_t instance_id;
  cache::DiskStore store;
  EventLog log;
  Counters counters;
  std::atomic<bool> sealed{false};

  std::mutex kernels_mutex; // serializes add_kernel; readers index the array directly
  std::array<std::unique_ptr<KernelState>, k_max_kernels> kernels;
  std::atomic<uint32_t> kernel_count{0};

  std::shared_mutex slots_mutex;
  llvm::DenseMap<VariantKey, std::shared_ptr<Slot>> slots;

  std::once_flag arch_once;
  Arch target_arch;

  std::mutex context_mutex; // serializes retaining the primary context
  std::atomic<CUcontext> context{nullptr};

  KernelState& kernel(KernelId id) { return *kernels[id.index]; }
  // The memory tier: the slot for these values, resolved (by this thread or another).
  llvm::Expected<Slot*> specialize_and_find(KernelId kernel, llvm::ArrayRef<int64_t> values);
  // The memory-tier key for these values; false (and `error` set) when a value does not fit.
  bool make_key(KernelId kernel, llvm::ArrayRef<int64_t> values, VariantKey& key,
                llvm::Error* error);
  // The slot when it is in the memory tier and ready; nullptr otherwise. Never waits.
  Slot* find_ready(const VariantKey& key);
  llvm::Expected<Slot*> find_or_resolve(const VariantKey& key);
  Arch arch();
  // The slow path (resolve.cpp): disk layers, then compile. Fills slot.variant.
  llvm::Error resolve(KernelState& kernel, llvm::ArrayRef<SpecValue> specs, Variant& out);
  llvm::Error load(Slot& slot);
  llvm::Error ensure_context();
};

} // namespace specjit::runtime
