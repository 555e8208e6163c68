// The Engine's launches: arguments checked against the variant's parameter sizes, the dynamic
// shared memory opt-in, cluster and programmatic launches, and the resident CTAs a persistent
// grid may use.
#include "runtime/engine.h"

#include "runtime/engine_impl.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

namespace specjit::runtime {

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

} // namespace specjit::runtime
