// The Engine: memory tier -> disk layers -> NVRTC compile, for every (kernel, variant).
//
//   Engine engine(config);                     // reads nothing from the environment itself
//   KernelId k = *engine.add_kernel(def);      // once per definition: validated, then cheap
//   auto v = engine.get(k, {num_tokens, ...}); // hot path: a hash lookup on a memory hit
//   engine.launch(**v, {grid, block}, args...);
//
// prepare() makes a variant ready without a GPU (compile or disk load only): `specjit
// precompile` and the tests use it. get() also loads the module on the device.
// Within a process each key compiles at most once (concurrent callers wait for the first);
// across processes a per-key lock on disk avoids duplicate work. No global lock is held while
// compiling or reading the disk. Every slow event is written to the recompilation log.
#pragma once

#include "runtime/device_facts.h"
#include "runtime/driver.h"
#include "runtime/kernel_def.h"

#include "support/config.h"
#include "support/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace specjit::runtime {

// Index of a registered kernel definition.
struct KernelId {
  uint32_t index = 0;
};

enum class VariantSource : uint8_t { compiled, disk, memory, remote };

// One compiled variant. Immutable once published by the engine, except its loaded state, set
// once when the module is loaded, and `shared_allowed`.
struct Variant {
  // What every launch reads, first and together (one cache line): the function, the parameter
  // sizes it checks the arguments against, the shared memory it may use.
  CUfunction function = nullptr; // set once when the module is loaded (get())
  // The largest dynamic shared memory a launch has been allowed (cuFuncSetAttribute, which
  // costs a driver call): a launch asking no more skips it.
  mutable std::atomic<unsigned> shared_allowed{48 * 1024};
  uint32_t param_count = 0; // == param_sizes.size()
  static constexpr size_t k_inline_params = 12;
  std::array<size_t, k_inline_params> inline_sizes{}; // param_sizes, when all fit
  KernelId kernel;
  std::string kernel_name;
  std::string name_expression;
  Digest128 key;
  std::string cubin;
  std::string lowered_name;
  llvm::json::Object variant; // template arguments as an object, e.g. {"num_tokens": "dynamic"}
  int registers = 0;
  int spill_bytes = 0;
  int shared_bytes = 0;
  std::vector<std::string> warnings; // ptxas diagnostics, verbatim (e.g. C7515)
  double compile_ms = 0; // from the entry's metadata when loaded from disk
  VariantSource source = VariantSource::compiled;
  // Why a compiled variant is not in the writable cache (a failed publish: a full disk, a
  // blocked kernel directory; or a refused root); empty when it was saved or loaded from disk.
  std::string not_saved;
  // Loaded state (get()):
  CUmodule module = nullptr;
  std::vector<size_t> param_sizes; // from cuFuncGetParamInfo, checked by launch()
};

struct LaunchConfig {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  // Programmatic dependent launch: the kernel may start before the previous kernel in the
  // stream has finished, once that kernel's CTAs have all run `griddepcontrol.launch_dependents`;
  // it must run `griddepcontrol.wait` before it reads anything the previous kernel writes.
  bool programmatic_serialization = false;
  // Thread-block cluster size along x (1: no cluster). The grid's x extent must be a multiple;
  // the kernel may then use the cluster's distributed shared memory and barriers (sm_90).
  unsigned cluster_x = 1;
};

// Counters since the engine was created. requests == memory_hits + disk_hits + remote_hits +
// compiles + failures, exactly, under any concurrency.
struct EngineStats {
  uint64_t requests = 0;
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t remote_hits = 0; // fetched from the fleet tier (docs/fleet.md)
  uint64_t compiles = 0;
  uint64_t failures = 0;
  uint64_t corrupt_entries = 0;
  uint64_t write_failures = 0;
  uint64_t storms = 0;
  // Cross-process compile-lock takes that waited (another process held the key and published
  // it meanwhile, or the take timed out), and the time spent taking the lock (every take).
  uint64_t lock_waits = 0;
  double lock_wait_ms_total = 0;
  double lock_wait_ms_max = 0;
  // Definitions with include directories: headers whose digests direct mode's checks and the
  // compiles' dependency records hashed, and those a stat hint vouched for instead.
  uint64_t headers_hashed = 0;
  uint64_t headers_from_hints = 0;
};

class Engine {
public:
  explicit Engine(const Config& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registers a definition (validated once). Registering an equal definition again returns the
  // first id. Definitions that share an id but differ in policies are distinct kernels: the
  // policies shape the name expression, so their variants never share a key.
  llvm::Expected<KernelId> add_kernel(const KernelDef& def);
  const KernelDef& definition(KernelId kernel) const;

  // Makes the variant for these values ready: memory, else disk, else compile. No GPU needed.
  // `values` has one entry per template parameter of the definition.
  llvm::Expected<const Variant*> prepare(KernelId kernel, llvm::ArrayRef<int64_t> values);
  // The same with the specialization already decided (one SpecValue per template parameter):
  // `specjit precompile --from-log` replays logged variants through this.
  llvm::Expected<const Variant*> prepare_specialized(KernelId kernel,
                                                     llvm::ArrayRef<SpecValue> specs);
  // prepare() + the module loaded on the engine's device.
  llvm::Expected<const Variant*> get(KernelId kernel, llvm::ArrayRef<int64_t> values);
  // The variant when it is already ready and loaded (a memory hit, counted as one), else
  // nullptr: never resolves, loads or fails. Lets a caller decide what a miss may do first
  // (the C ABI refuses to compile while a stream captures a CUDA graph).
  const Variant* find_loaded(KernelId kernel, llvm::ArrayRef<int64_t> values);

  // Launches a loaded variant. Arguments must be trivially copyable and match the kernel's
  // parameter sizes (checked against cuFuncGetParamInfo).
  template <typename... Args>
  llvm::Error launch(const Variant& variant, const LaunchConfig& config, const Args&... args) {
    static_assert((std::is_trivially_copyable_v<Args> && ...),
                  "kernel arguments must be trivially copyable");
    constexpr size_t count = sizeof...(Args);
    const void* pointers[count == 0 ? 1 : count] = {static_cast<const void*>(&args)...};
    const size_t sizes[count == 0 ? 1 : count] = {sizeof(Args)...};
    return launch_packed(variant, config, pointers, sizes, count);
  }
  llvm::Error launch_packed(const Variant& variant, const LaunchConfig& config,
                            const void* const* arguments, const size_t* sizes, size_t count);

  // CTAs of a loaded variant the device holds at once with config's block size and shared
  // memory (CTAs per SM by the driver's occupancy calculator x SMs): the grid of a persistent
  // kernel, whose CTAs may wait for each other. Asked once per (variant key, block size, shared
  // memory) and engine.
  llvm::Expected<unsigned> resident_ctas(const Variant& variant, const LaunchConfig& config);

  // The facts of the GPU this engine launches on (SMs, shared memory, registers), read once
  // from the driver; with no device, or a device of another architecture than the configured
  // target (precompiling for another machine), the target's documented defaults
  // (runtime/device_facts.h). Never fails.
  const DeviceFacts& device_facts() const;

  // From now on compiles are `serving` phase; with SPECJIT_STRICT=error they fail.
  void seal();
  bool sealed() const;

  EngineStats stats() const;
  // The architecture variants are compiled for: the device's, else the configuration's.
  Arch arch() const;
  const Config& config() const;
  // Unique among the engines of this process, never reused: lets callers cache per engine.
  uint64_t instance_id() const;
  // Whether compiled variants can be persisted (false: memory only, with the reason).
  bool disk_writable() const;
  std::string disk_unusable_reason() const;

  // The device's primary context, made current on the calling thread. For tests and benchmarks
  // that allocate memory next to the engine's launches.
  llvm::Error make_context_current();

  struct Impl; // runtime/engine_impl.h; not part of the API

private:
  std::unique_ptr<Impl> m_impl;
};

} // namespace specjit::runtime
