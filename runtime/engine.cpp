// The Engine's life and registry: construction (store, log, remote tier), destruction (modules
// unloaded, the primary context released), kernel definitions, counters and settings. The memory
// tier is engine_memory.cpp, the device engine_device.cpp, launches engine_launch.cpp, the disk
// and compile tiers resolve.cpp.
#include "runtime/engine.h"

#include "runtime/engine_impl.h"
#include "runtime/store_config.h"

#include "support/error.h"

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

bool Engine::disk_writable() const { return m_impl->store.writable(); }
std::string Engine::disk_unusable_reason() const { return m_impl->store.unusable_reason(); }

} // namespace specjit::runtime
