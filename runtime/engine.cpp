#include "runtime/engine.h"

#include "runtime/engine_impl.h"
#include "runtime/store_config.h"

#include "support/error.h"
#include "support/logging.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>

namespace specjit::runtime {

namespace {

// The default log lives in the cache root: it is opened through the store's checked directory
// handles, so nothing another user planted there is followed and a refused root gets no log.
LogOpener in_root_log_opener(const Config& config, const cache::DiskStore& store) {
  if (!config.log.value.empty())
    return {};
  return [&store] { return store.open_log_for_append("events.jsonl"); };
}

uint64_t next_instance_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

Engine::Impl::Impl(const Config& config_in)
    : instance_id(next_instance_id()), config(config_in), store(store_options(config_in)),
      log(config_in.log_path(), config_in.log_max_bytes.value,
          in_root_log_opener(config_in, store)),
      remote(open_remote_tier(config_in, store, log)) {
  // SPECJIT_STRICT means the deployment expects a complete cache: serving from the start.
  sealed = config.strict.value != StrictMode::off;
  if (store.writable())
    store.sweep_stale_temps();
}

Arch Engine::Impl::arch() {
  std::call_once(arch_once, [&] {
    // An explicitly configured architecture wins (precompiling for another machine);
    // otherwise the device decides; otherwise the default (sm_90a).
    target_arch = config.default_arch();
    if (config.arch.source != SettingSource::default_value || !device_available())
      return;
    const Driver& drv = *driver();
    CUdevice device = 0;
    int major = 0, minor = 0;
    if (drv.cuDeviceGet(&device, static_cast<int>(config.device.value)) != CUDA_SUCCESS ||
        drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) !=
            CUDA_SUCCESS ||
        drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) !=
            CUDA_SUCCESS)
      return;
    target_arch = Arch::for_device(major, minor);
  });
  return target_arch;
}

namespace {
// The context this thread made current last (initial-exec: see t_slot_cache).
[[gnu::tls_model("initial-exec")]] thread_local CUcontext t_current_context = nullptr;
} // namespace

const DeviceFacts& Engine::Impl::device_facts() {
  std::call_once(facts_once, [&] {
    // The device's, unless an explicitly configured architecture describes another machine.
    facts = DeviceFacts::for_target(arch());
    if (!device_available())
      return;
    auto queried = query_device_facts(static_cast<int>(config.device.value));
    if (!queried) {
      log_warning(llvm::Twine("cannot read the device's facts, using ") + facts.arch.name() +
                  "'s defaults: " + llvm::toString(queried.takeError()));
      return;
    }
    if (queried->arch == facts.arch)
      facts = std::move(*queried);
  });
  return facts;
}

llvm::Error Engine::Impl::ensure_context() {
  // The launch path: this thread already made the engine's context current. (Serving runtimes
  // share the device's primary context, so switching back is rare.)
  CUcontext ctx = context.load(std::memory_order_acquire);
  if (ctx != nullptr && t_current_context == ctx) [[likely]]
    return llvm::Error::success();
  return make_context_current_slow();
}

llvm::Error Engine::Impl::make_context_current_slow() {
  CUcontext ctx = context.load(std::memory_order_acquire);
  auto drv = driver();
  if (!drv)
    return drv.takeError();
  if (ctx == nullptr) {
    std::lock_guard<std::mutex> lock(context_mutex);
    ctx = context.load(std::memory_order_acquire);
    if (ctx == nullptr) {
      CUdevice device = 0;
      if (auto err = drv->check(drv->cuDeviceGet(&device, static_cast<int>(config.device.value)),
                                "cuDeviceGet"))
        return err;
      if (auto err =
              drv->check(drv->cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain"))
        return err;
      context.store(ctx, std::memory_order_release);
    }
  }
  if (auto err = drv->check(drv->cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
    return err;
  t_current_context = ctx;
  return llvm::Error::success();
}

llvm::Error Engine::Impl::load(Slot& slot) {
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.loaded.load(std::memory_order_acquire))
    return llvm::Error::success();
  if (auto err = ensure_context())
    return err;
  const Driver& drv = *driver();
  Variant& v = slot.variant;
  if (auto err = drv.check(drv.cuModuleLoadData(&v.module, v.cubin.data()), "cuModuleLoadData"))
    return err;
  if (auto err = drv.check(drv.cuModuleGetFunction(&v.function, v.module, v.lowered_name.c_str()),
                           "cuModuleGetFunction"))
    return err;
  // Parameter sizes, read once here so that every launch can check its arguments cheaply.
  for (size_t index = 0;; ++index) {
    size_t offset = 0, size = 0;
    if (drv.cuFuncGetParamInfo(v.function, index, &offset, &size) != CUDA_SUCCESS)
      break;
    v.param_sizes.push_back(size);
  }
  v.param_count = static_cast<uint32_t>(v.param_sizes.size());
  for (size_t i = 0; i < v.param_sizes.size() && i < Variant::k_inline_params; ++i)
    v.inline_sizes[i] = v.param_sizes[i];
  slot.loaded.store(true, std::memory_order_release);
  return llvm::Error::success();
}

Engine::Engine(const Config& config) : m_impl(std::make_unique<Impl>(config)) {}

Engine::~Engine() {
  CUcontext context = m_impl->context.load();
  if (context == nullptr)
    return;
  // Modules live as long as the engine; the primary context is released, not destroyed.
  const Driver& drv = *driver();
  drv.cuCtxSetCurrent(context);
  for (auto& entry : m_impl->slots)
    if (entry.second->loaded.load())
      drv.cuModuleUnload(entry.second->variant.module);
  CUdevice device = 0;
  if (drv.cuDeviceGet(&device, static_cast<int>(m_impl->config.device.value)) == CUDA_SUCCESS)
    drv.cuDevicePrimaryCtxRelease(device);
}

llvm::Expected<KernelId> Engine::add_kernel(const KernelDef& def) {
  std::lock_guard<std::mutex> lock(m_impl->kernels_mutex);
  uint32_t count = m_impl->kernel_count.load(std::memory_order_relaxed);
  for (uint32_t index = 0; index < count; ++index)
    if (m_impl->kernels[index]->def == def)
      return KernelId{index};
  if (auto err = def.validate())
    return err;
  if (count == k_max_kernels)
    return make_error(Errc::unsupported, "an engine holds at most {} kernel definitions",
                      k_max_kernels);
  auto prepared = prepare_source(def);
  if (!prepared)
    return prepared.takeError();
  auto state = std::make_unique<KernelState>();
  state->param_count = static_cast<uint32_t>(def.params.size()); // <= k_max_params: validated
  for (size_t i = 0; i < def.params.size(); ++i) {
    state->kinds[i] = def.params[i].policy.kind;
    state->enum_sizes[i] = def.params[i].is_enum()
                               ? static_cast<uint32_t>(def.params[i].enum_names.size())
                               : 0;
  }
  state->def = def;
  state->source_digest = prepared->definition_digest;
  state->prepared = std::move(*prepared);
  m_impl->kernels[count] = std::move(state);
  m_impl->kernel_count.store(count + 1, std::memory_order_release);
  return KernelId{count};
}

const KernelDef& Engine::definition(KernelId kernel) const { return m_impl->kernel(kernel).def; }

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
    return std::move(error);
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
    return std::move(err);
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

namespace {
// Dynamic shared memory past the 48 KB default needs the function's opt-in (launches and
// occupancy queries alike).
llvm::Error raise_shared_bytes(const Driver& drv, const Variant& variant, unsigned shared_bytes);
inline llvm::Error allow_shared_bytes(const Driver& drv, const Variant& variant,
                                      unsigned shared_bytes) {
  if (shared_bytes <= variant.shared_allowed.load(std::memory_order_acquire)) [[likely]]
    return llvm::Error::success();
  return raise_shared_bytes(drv, variant, shared_bytes);
}

llvm::Error raise_shared_bytes(const Driver& drv, const Variant& variant, unsigned shared_bytes) {
  // Rare (once per variant and size): serialized, so the function's limit only ever rises and
  // always equals shared_allowed.
  static std::mutex raise_mutex;
  std::lock_guard<std::mutex> lock(raise_mutex);
  if (shared_bytes <= variant.shared_allowed.load(std::memory_order_relaxed))
    return llvm::Error::success();
  if (auto err = drv.check(drv.cuFuncSetAttribute(variant.function,
                                                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                  static_cast<int>(shared_bytes)),
                           "cuFuncSetAttribute"))
    return err;
  variant.shared_allowed.store(shared_bytes, std::memory_order_release);
  return llvm::Error::success();
}
} // namespace

llvm::Error Engine::launch_packed(const Variant& variant, const LaunchConfig& config,
                                  const void* const* arguments, const size_t* sizes, size_t count) {
  if (variant.function == nullptr)
    return make_error(Errc::invalid_argument,
                      "kernel {} variant {} is not loaded: get it with Engine::get() first",
                      variant.kernel_name, variant.name_expression);
  bool sizes_match =
      count == variant.param_count &&
      (count == 0 || std::memcmp(sizes,
                                 count <= Variant::k_inline_params ? variant.inline_sizes.data()
                                                                   : variant.param_sizes.data(),
                                 count * sizeof(size_t)) == 0);
  if (!sizes_match) {
    std::string passed, expected;
    for (size_t i = 0; i < count; ++i)
      passed += fmt::format("{}{}", i ? "," : "", sizes[i]);
    for (size_t i = 0; i < variant.param_sizes.size(); ++i)
      expected += fmt::format("{}{}", i ? "," : "", variant.param_sizes[i]);
    return make_error(Errc::invalid_argument,
                      "kernel {} ({}) takes parameters of sizes [{}] bytes; the launch passed [{}]",
                      variant.kernel_name, variant.name_expression, expected, passed);
  }
  const Driver& drv = loaded_driver_table(); // loaded: the variant has a function
  if (auto err = allow_shared_bytes(drv, variant, config.shared_bytes))
    return err;
  if (config.cluster_x > 1 && config.grid[0] % config.cluster_x != 0)
    return make_error(Errc::invalid_argument,
                      "kernel {} ({}): grid x extent {} is not a multiple of the cluster size {}",
                      variant.kernel_name, variant.name_expression, config.grid[0],
                      config.cluster_x);
  if (config.programmatic_serialization || config.cluster_x > 1) {
    std::array<CUlaunchAttribute, 2> attributes{};
    unsigned count = 0;
    if (config.programmatic_serialization) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attributes[count++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (config.cluster_x > 1) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attributes[count].value.clusterDim.x = config.cluster_x;
      attributes[count].value.clusterDim.y = 1;
      attributes[count++].value.clusterDim.z = 1;
    }
    CUlaunchConfig launch{};
    launch.gridDimX = config.grid[0];
    launch.gridDimY = config.grid[1];
    launch.gridDimZ = config.grid[2];
    launch.blockDimX = config.block[0];
    launch.blockDimY = config.block[1];
    launch.blockDimZ = config.block[2];
    launch.sharedMemBytes = config.shared_bytes;
    launch.hStream = config.stream;
    launch.attrs = attributes.data();
    launch.numAttrs = count;
    return drv.check(
        drv.cuLaunchKernelEx(&launch, variant.function, const_cast<void**>(arguments), nullptr),
        "cuLaunchKernelEx");
  }
  return drv.check(drv.cuLaunchKernel(variant.function, config.grid[0], config.grid[1],
                                      config.grid[2], config.block[0], config.block[1],
                                      config.block[2], config.shared_bytes, config.stream,
                                      const_cast<void**>(arguments), nullptr),
                   "cuLaunchKernel");
}

void Engine::seal() { m_impl->sealed.store(true); }
bool Engine::sealed() const { return m_impl->sealed.load(); }

EngineStats Engine::stats() const {
  const Counters& c = m_impl->counters;
  EngineStats stats;
  stats.memory_hits = c.memory_hits.load();
  stats.disk_hits = c.disk_hits.load();
  stats.remote_hits = c.remote_hits.load();
  stats.compiles = c.compiles.load();
  stats.failures = c.failures.load();
  // Every request ends in exactly one of these outcomes; counting them is counting requests.
  stats.requests =
      stats.memory_hits + stats.disk_hits + stats.remote_hits + stats.compiles + stats.failures;
  stats.corrupt_entries = c.corrupt_entries.load();
  stats.write_failures = c.write_failures.load();
  stats.storms = c.storms.load();
  stats.lock_waits = c.lock_waits.load();
  stats.lock_wait_ms_total = static_cast<double>(c.lock_wait_us_total.load()) / 1000.0;
  stats.lock_wait_ms_max = static_cast<double>(c.lock_wait_us_max.load()) / 1000.0;
  stats.headers_hashed = c.headers_hashed.load();
  stats.headers_from_hints = c.headers_from_hints.load();
  return stats;
}

Arch Engine::arch() const { return m_impl->arch(); }
const Config& Engine::config() const { return m_impl->config; }
uint64_t Engine::instance_id() const { return m_impl->instance_id; }
llvm::Expected<unsigned> Engine::resident_ctas(const Variant& variant, const LaunchConfig& config) {
  if (variant.function == nullptr)
    return make_error(Errc::invalid_argument, "kernel {} ({}) is not loaded", variant.kernel_name,
                      variant.name_expression);
  const unsigned threads = config.block[0] * config.block[1] * config.block[2];
  const Impl::OccupancyKey key{variant.key, threads, config.shared_bytes};
  {
    std::shared_lock<std::shared_mutex> lock(m_impl->occupancy_mutex);
    auto it = m_impl->occupancy.find(key);
    if (it != m_impl->occupancy.end())
      return it->second;
  }
  if (auto err = m_impl->ensure_context())
    return err;
  const Driver& drv = *driver();
  if (auto err = allow_shared_bytes(drv, variant, config.shared_bytes))
    return err;
  int per_sm = 0;
  if (auto err =
          drv.check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        &per_sm, variant.function, static_cast<int>(threads), config.shared_bytes),
                    "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    return err;
  if (per_sm < 1)
    return make_error(
        Errc::invalid_argument,
        "kernel {} ({}): no CTA of {} threads and {} bytes of shared memory fits an SM",
        variant.kernel_name, variant.name_expression, threads, config.shared_bytes);
  // The device's own SM count, whatever architecture the engine compiles for: CTAs of a
  // persistent grid past what the device holds could wait for each other forever.
  int sms = 0;
  CUdevice device = 0;
  if (auto err = drv.check(drv.cuCtxGetDevice(&device), "cuCtxGetDevice"))
    return err;
  if (auto err = drv.check(
          drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
          "cuDeviceGetAttribute"))
    return err;
  const unsigned ctas = static_cast<unsigned>(per_sm * sms);
  std::unique_lock<std::shared_mutex> lock(m_impl->occupancy_mutex);
  m_impl->occupancy.emplace(key, ctas);
  return ctas;
}

const DeviceFacts& Engine::device_facts() const { return m_impl->device_facts(); }

bool Engine::disk_writable() const { return m_impl->store.writable(); }
std::string Engine::disk_unusable_reason() const { return m_impl->store.unusable_reason(); }
llvm::Error Engine::make_context_current() { return m_impl->ensure_context(); }

} // namespace specjit::runtime
