// The Engine and its device: the architecture it compiles for, the device's facts, the primary
// context made current (its fast check is inline, engine_impl.h), and loading a variant's module.
#include "runtime/engine.h"

#include "runtime/engine_impl.h"

#include "support/logging.h"

namespace specjit::runtime {

[[gnu::tls_model("initial-exec")]] __thread CUcontext t_current_context = nullptr;

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

const DeviceFacts& Engine::device_facts() const { return m_impl->device_facts(); }

llvm::Error Engine::make_context_current() { return m_impl->ensure_context(); }

} // namespace specjit::runtime
