#include "capi/handles.h"

#include "support/error.h"

#include <unordered_set>

namespace specjit::capi {

namespace {

// Every handle ever made (tombstones stay readable) and the engines still alive.
struct Registry {
  std::mutex mutex;
  std::unordered_set<const void*> handles;
  std::unordered_set<const specjit_engine*> live_engines;
};

Registry& registry() {
  static Registry* instance = new Registry; // never destroyed: handles outlive static teardown
  return *instance;
}

void remember(const void* handle) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.handles.insert(handle);
}

// What the pointer is, when specjit made it (reading its tag is then safe: tombstones stay).
std::string identify(const void* pointer) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.handles.count(pointer))
    return "not a handle specjit created";
  // Every handle struct starts with its atomic tag.
  uint32_t tag = static_cast<const std::atomic<uint32_t>*>(pointer)->load();
  return describe_tag(tag);
}

} // namespace

const char* describe_tag(uint32_t tag) {
  switch (static_cast<HandleTag>(tag)) {
  case HandleTag::settings: return "a specjit_settings";
  case HandleTag::engine: return "a specjit_engine";
  case HandleTag::kernel: return "a specjit_kernel";
  case HandleTag::variant: return "a specjit_variant";
  case HandleTag::destroyed_settings: return "a destroyed specjit_settings";
  case HandleTag::destroyed_engine: return "a destroyed specjit_engine";
  case HandleTag::destroyed_kernel: return "a kernel of a destroyed engine";
  case HandleTag::destroyed_variant: return "a variant of a destroyed engine";
  }
  return "not a handle specjit created";
}

specjit_settings* new_settings() {
  auto* handle = new specjit_settings;
  remember(handle);
  return handle;
}

specjit_engine* new_engine(std::unique_ptr<runtime::Engine> engine) {
  auto* handle = new specjit_engine;
  handle->engine = std::move(engine);
  remember(handle);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live_engines.insert(handle);
  return handle;
}

bool engine_is_live(const specjit_engine* engine) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.live_engines.count(engine) != 0;
}

void destroy_engine(specjit_engine* engine) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.live_engines.erase(engine))
      return;
  }
  engine->tag.store(static_cast<uint32_t>(HandleTag::destroyed_engine));
  std::lock_guard<std::mutex> lock(engine->mutex);
  for (specjit_kernel* kernel : engine->kernels) {
    kernel->tag.store(static_cast<uint32_t>(HandleTag::destroyed_kernel));
    std::lock_guard<std::mutex> kernel_lock(kernel->mutex);
    for (auto& entry : kernel->variants) {
      entry.second->tag.store(static_cast<uint32_t>(HandleTag::destroyed_variant));
      entry.second->variant = nullptr;
    }
    kernel->engine = nullptr;
  }
  engine->engine.reset(); // unloads the modules, releases the context
}

specjit_kernel* kernel_handle(specjit_engine& engine, runtime::KernelId id) {
  std::lock_guard<std::mutex> lock(engine.mutex);
  for (specjit_kernel* kernel : engine.kernels)
    if (kernel->id.index == id.index)
      return kernel;
  auto* kernel = new specjit_kernel;
  kernel->owner = &engine;
  kernel->engine = engine.engine.get();
  kernel->id = id;
  const runtime::KernelDef& def = engine.engine->definition(id);
  kernel->name = def.id;
  for (const runtime::ParamDef& param : def.params)
    kernel->param_names.push_back(param.name);
  engine.kernels.push_back(kernel);
  remember(kernel);
  return kernel;
}

specjit_variant* variant_handle(specjit_kernel& kernel, const runtime::Variant& variant) {
  std::lock_guard<std::mutex> lock(kernel.mutex);
  specjit_variant*& slot = kernel.variants[&variant];
  if (slot != nullptr)
    return slot;
  slot = new specjit_variant;
  slot->kernel = &kernel;
  slot->variant = &variant;
  slot->key_hex = variant.key.hex();
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::json::Value(llvm::json::Object(variant.variant));
  slot->variant_json = std::move(os.str());
  remember(slot);
  return slot;
}

llvm::Error check_engine(const specjit_engine* engine, const char* function) {
  if (engine == nullptr)
    return make_error(Errc::invalid_argument, "{}: engine is NULL", function);
  if (engine_is_live(engine))
    return llvm::Error::success();
  return make_error(Errc::invalid_argument, "{}: engine is {}, not a live specjit_engine",
                    function, identify(engine));
}

llvm::Error check_settings(const specjit_settings* settings, const char* function) {
  if (settings == nullptr)
    return make_error(Errc::invalid_argument, "{}: settings is NULL", function);
  std::string what = identify(settings);
  if (what == describe_tag(static_cast<uint32_t>(HandleTag::settings)))
    return llvm::Error::success();
  return make_error(Errc::invalid_argument, "{}: settings is {}, not a live specjit_settings",
                    function, what);
}

llvm::Error kernel_check_failed(const specjit_kernel* kernel, const char* function) {
  if (kernel == nullptr)
    return make_error(Errc::invalid_argument, "{}: kernel is NULL", function);
  return make_error(Errc::invalid_argument, "{}: kernel is {}, not a live specjit_kernel",
                    function, identify(kernel));
}

llvm::Error variant_check_failed(const specjit_variant* variant, const char* function) {
  if (variant == nullptr)
    return make_error(Errc::invalid_argument, "{}: variant is NULL", function);
  return make_error(Errc::invalid_argument, "{}: variant is {}, not a live specjit_variant",
                    function, identify(variant));
}

llvm::Error struct_check_failed(const void* pointer, size_t struct_size, size_t minimum,
                                const char* function, const char* argument) {
  if (pointer == nullptr)
    return make_error(Errc::invalid_argument, "{}: {} is NULL", function, argument);
  return make_error(Errc::invalid_argument,
                    "{}: {}->struct_size is {}, smaller than the {} bytes of its first version "
                    "(set it to sizeof the struct)",
                    function, argument, struct_size, minimum);
}

} // namespace specjit::capi
