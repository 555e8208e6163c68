// The Engine's memory tier: the variant key of a call's values, the per-thread cache of ready
// slots, the shared map of slots and the single resolver of each; prepare, get, find_loaded.
// Whatever a launch of a ready variant runs is here or inline, so that it inlines (make_key,
// find_ready, ensure_context).
#include "runtime/engine.h"

#include "runtime/engine_impl.h"

#include "support/error.h"

#include <memory>

namespace specjit::runtime {

llvm::Expected<const Variant*> Engine::prepare(KernelId kernel, llvm::ArrayRef<int64_t> values) {
  auto slot = m_impl->specialize_and_find(kernel, values);
  if (!slot)
    return slot.takeError();
  return &(*slot)->variant;
}

llvm::Expected<Slot*> Engine::Impl::specialize_and_find(KernelId kernel,
                                                        llvm::ArrayRef<int64_t> values) {
  VariantKey key;
  llvm::Error error = llvm::Error::success();
  if (!make_key(kernel, values, key, &error)) {
    counters.failures.fetch_add(1, std::memory_order_relaxed);
    return error;
  }
  return find_or_resolve(key);
}

// Inlined into the launch path's lookup (find_loaded), which a launch of every ready variant pays.
[[gnu::always_inline]] inline bool Engine::Impl::make_key(KernelId kernel,
                                                          llvm::ArrayRef<int64_t> values,
                                                          VariantKey& key, llvm::Error* error) {
  const KernelState& state = this->kernel(kernel);
  if (values.size() != state.param_count) {
    if (error)
      *error = make_error(Errc::invalid_argument, "kernel {} takes {} template values, got {}",
                          state.def.id, state.param_count, values.size());
    return false;
  }
  // The hot path builds the key's words directly (dynamic and exact inline, from the kinds'
  // cache line); anything else, and every invalid value, goes through specialize() for the
  // full mapping or the message.
  // `key` arrives default-constructed (words zero): only the words in use are written.
  key.kernel = kernel.index;
  key.count = static_cast<uint32_t>(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t value = values[i];
    if (value >= 0 && value < k_spec_base && state.kinds[i] == PolicyKind::dynamic) {
      key.words[i] = 0;
      continue;
    }
    if (value >= 0 && value < k_spec_base && state.kinds[i] == PolicyKind::exact &&
        (state.enum_sizes[i] == 0 || value < state.enum_sizes[i])) {
      key.words[i] = SpecValue{SpecKind::exact, value}.word();
      continue;
    }
    const KernelDef& def = state.def;
    if (def.params[i].is_enum() &&
        (value < 0 || value >= static_cast<int64_t>(def.params[i].enum_names.size()))) {
      if (error)
        *error = make_error(Errc::invalid_argument,
                            "kernel {}, parameter {}: {} is no value of {} (0 to {})", def.id,
                            def.params[i].name, value, def.params[i].enum_type,
                            def.params[i].enum_names.size() - 1);
      return false;
    }
    const Policy& policy = def.params[i].policy;
    auto spec = specialize(policy, value);
    if (!spec) {
      if (error)
        *error = make_error(Errc::invalid_argument, "kernel {}, parameter {}: {}", def.id,
                            def.params[i].name, llvm::toString(spec.takeError()));
      else
        llvm::consumeError(spec.takeError());
      return false;
    }
    key.words[i] = spec->word();
  }
  return true;
}

namespace {

// Waits for a slot another thread is resolving; a success is a memory hit.
llvm::Expected<Slot*> wait_for(Slot& slot, Counters& counters) {
  std::unique_lock<std::mutex> lock(slot.mutex);
  slot.changed.wait(lock, [&] { return slot.state.load() != Slot::State::pending; });
  if (slot.state.load() == Slot::State::failed) {
    counters.failures.fetch_add(1, std::memory_order_relaxed);
    return slot.failure.rebuild();
  }
  counters.memory_hits.fetch_add(1, std::memory_order_relaxed);
  return &slot;
}

} // namespace

llvm::Expected<const Variant*> Engine::prepare_specialized(KernelId kernel,
                                                           llvm::ArrayRef<SpecValue> specs) {
  const KernelDef& def = m_impl->kernel(kernel).def;
  if (specs.size() != def.params.size()) {
    m_impl->counters.failures.fetch_add(1, std::memory_order_relaxed);
    return make_error(Errc::invalid_argument, "kernel {} takes {} template values, got {}", def.id,
                      def.params.size(), specs.size());
  }
  VariantKey key{kernel.index, static_cast<uint32_t>(specs.size()), {}};
  for (size_t i = 0; i < specs.size(); ++i) {
    bool dynamic = specs[i].kind == SpecKind::dynamic;
    if (def.params[i].encoding == ParamEncoding::raw && dynamic) {
      m_impl->counters.failures.fetch_add(1, std::memory_order_relaxed);
      return make_error(Errc::invalid_argument,
                        "kernel {}, parameter {}: a raw template parameter needs a compiled-in "
                        "value, not {}",
                        def.id, def.params[i].name, specs[i].describe());
    }
    if (def.params[i].is_enum() &&
        (specs[i].kind != SpecKind::exact || specs[i].argument < 0 ||
         specs[i].argument >= static_cast<int64_t>(def.params[i].enum_names.size()))) {
      m_impl->counters.failures.fetch_add(1, std::memory_order_relaxed);
      return make_error(Errc::invalid_argument, "kernel {}, parameter {}: {} is no value of {}",
                        def.id, def.params[i].name, specs[i].describe(), def.params[i].enum_type);
    }
    if (def.params[i].encoding == ParamEncoding::none && !dynamic) {
      m_impl->counters.failures.fetch_add(1, std::memory_order_relaxed);
      return make_error(Errc::invalid_argument,
                        "kernel {}, parameter {}: not a template parameter, so its value must "
                        "be dynamic, not {}",
                        def.id, def.params[i].name, specs[i].describe());
    }
    key.words[i] = specs[i].word();
  }
  auto slot = m_impl->find_or_resolve(key);
  if (!slot)
    return slot.takeError();
  return &(*slot)->variant;
}

namespace {

// A small per-thread, direct-mapped cache of ready slots in front of the shared map: a hit
// costs a hash and a compare, no lock and no reference count. Entries name the engine by its
// process-unique instance id, so a later engine (even at the same address) never matches;
// ready slots live as long as their engine.
struct alignas(64) CachedSlot {
  uint64_t engine = 0;
  Slot* slot = nullptr;
  VariantKey key; // last: with up to 5 parameters a hit reads one cache line
};
constexpr size_t k_thread_cache_slots = 64;
using SlotCache = std::array<CachedSlot, k_thread_cache_slots>;

// The launch path's thread-locals are initial-exec: libspecjit.so is a shared library, where the
// default model costs a __tls_get_addr call per access. Only a pointer (8 bytes) is static TLS,
// as a library that Python loads with dlopen gets only glibc's small static-TLS reserve.
[[gnu::tls_model("initial-exec")]] thread_local SlotCache* t_slot_cache = nullptr;

// A thread's first lookup: the cache on the heap, freed when the thread exits.
[[gnu::noinline]] SlotCache& allocate_slot_cache() {
  struct Owner {
    std::unique_ptr<SlotCache> cache = std::make_unique<SlotCache>();
    ~Owner() { t_slot_cache = nullptr; }
  };
  thread_local Owner owner;
  t_slot_cache = owner.cache.get();
  return *t_slot_cache;
}

[[gnu::always_inline]] inline CachedSlot& thread_cache_entry(const VariantKey& key) {
  unsigned hash = llvm::DenseMapInfo<VariantKey>::getHashValue(key);
  SlotCache* cache = t_slot_cache;
  return (cache != nullptr ? *cache : allocate_slot_cache())[hash % k_thread_cache_slots];
}

} // namespace

llvm::Expected<Slot*> Engine::Impl::find_or_resolve(const VariantKey& key) {
  CachedSlot& cached = thread_cache_entry(key);
  if (cached.engine == instance_id && cached.key == key) {
    counters.memory_hits.fetch_add(1, std::memory_order_relaxed);
    return cached.slot;
  }
  auto remember = [&](llvm::Expected<Slot*> found) -> llvm::Expected<Slot*> {
    if (found)
      cached = CachedSlot{instance_id, *found, key};
    return found;
  };

  std::shared_ptr<Slot> slot;
  {
    std::shared_lock<std::shared_mutex> lock(slots_mutex);
    auto it = slots.find(key);
    if (it != slots.end())
      slot = it->second;
  }
  if (slot) {
    // The common case: ready, no lock beyond the map's.
    if (slot->state.load(std::memory_order_acquire) == Slot::State::ready) {
      counters.memory_hits.fetch_add(1, std::memory_order_relaxed);
      return remember(slot.get());
    }
    return remember(wait_for(*slot, counters));
  }
  {
    std::unique_lock<std::shared_mutex> lock(slots_mutex);
    auto [it, inserted] = slots.try_emplace(key, nullptr);
    if (!inserted) {
      slot = it->second;
      lock.unlock();
      return remember(wait_for(*slot, counters));
    }
    slot = std::make_shared<Slot>();
    it->second = slot;
  }
  // This thread resolves the variant; no engine-wide lock is held while it compiles.
  KernelId kernel{key.kernel};
  std::array<SpecValue, k_max_params> specs;
  for (size_t i = 0; i < key.count; ++i)
    specs[i] = *SpecValue::from_word(key.words[i]); // words come from SpecValue::word()
  slot->variant.kernel = kernel;
  llvm::Error err = resolve(this->kernel(kernel),
                            llvm::ArrayRef<SpecValue>(specs.data(), key.count), slot->variant);
  std::lock_guard<std::mutex> lock(slot->mutex);
  if (err) {
    err = slot->failure.record(std::move(err));
    slot->state.store(Slot::State::failed, std::memory_order_release);
    {
      // Forget the failure, so that a later request tries again.
      std::unique_lock<std::shared_mutex> map_lock(slots_mutex);
      slots.erase(key);
    }
    slot->changed.notify_all();
    counters.failures.fetch_add(1, std::memory_order_relaxed);
    return err;
  }
  slot->state.store(Slot::State::ready, std::memory_order_release);
  slot->changed.notify_all();
  return remember(slot.get());
}

[[gnu::always_inline]] inline Slot* Engine::Impl::find_ready(const VariantKey& key) {
  CachedSlot& cached = thread_cache_entry(key);
  if (cached.engine == instance_id && cached.key == key)
    return cached.slot;
  std::shared_lock<std::shared_mutex> lock(slots_mutex);
  auto it = slots.find(key);
  if (it == slots.end() || it->second->state.load(std::memory_order_acquire) != Slot::State::ready)
    return nullptr;
  cached = CachedSlot{instance_id, it->second.get(), key};
  return it->second.get();
}

const Variant* Engine::find_loaded(KernelId kernel, llvm::ArrayRef<int64_t> values) {
  VariantKey key;
  if (!m_impl->make_key(kernel, values, key, nullptr))
    return nullptr;
  Slot* slot = m_impl->find_ready(key);
  if (slot == nullptr || !slot->loaded.load(std::memory_order_acquire))
    return nullptr;
  if (auto err = m_impl->ensure_context()) {
    llvm::consumeError(std::move(err)); // get() reports it
    return nullptr;
  }
  m_impl->counters.memory_hits.fetch_add(1, std::memory_order_relaxed);
  return &slot->variant;
}

llvm::Expected<const Variant*> Engine::get(KernelId kernel, llvm::ArrayRef<int64_t> values) {
  auto slot = m_impl->specialize_and_find(kernel, values);
  if (!slot)
    return slot.takeError();
  // Loading is the only change a slot sees after it is published.
  if (!(*slot)->loaded.load(std::memory_order_acquire)) {
    if (auto err = m_impl->load(**slot))
      return err;
  } else if (auto err = m_impl->ensure_context()) {
    return err;
  }
  return &(*slot)->variant;
}

} // namespace specjit::runtime
