// The C ABI's handles: plain structs behind the opaque types of specjit.h, each starting with a
// tag that every call checks before it trusts the rest.
//
// Handle memory is never returned to the allocator: destroying an engine (or settings) frees
// what it owns and turns the struct, and the engine's kernels and variants, into tombstones
// whose tag says "destroyed". A stale handle is then a clear error, never a read of freed
// memory, and the hot path checks a kernel with a single load. A tombstone costs a few dozen
// bytes per handle ever created. Engines are also kept in a registry of the live ones, which
// the (not hot) engine calls consult first, so a pointer that was never a handle is refused too.
#pragma once

#include "specjit/specjit.h"

#include "runtime/engine.h"

#include <llvm/ADT/DenseMap.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace specjit::capi {

enum class HandleTag : uint32_t {
  settings = 0x53455431, // "SET1"
  engine = 0x454e4731,   // "ENG1"
  kernel = 0x4b524e31,   // "KRN1"
  variant = 0x56415231,  // "VAR1"
  destroyed_settings = 0x64534554,
  destroyed_engine = 0x64454e47,
  destroyed_kernel = 0x644b524e,
  destroyed_variant = 0x64564152,
};

// What a tag is, for messages: "a specjit_kernel", "a destroyed specjit_engine".
const char* describe_tag(uint32_t tag);

} // namespace specjit::capi

struct specjit_settings {
  std::atomic<uint32_t> tag{static_cast<uint32_t>(specjit::capi::HandleTag::settings)};
  std::map<std::string, std::string> values; // SPECJIT_* variable -> value
};

struct specjit_variant {
  std::atomic<uint32_t> tag{static_cast<uint32_t>(specjit::capi::HandleTag::variant)};
  specjit_kernel* kernel = nullptr;
  const specjit::runtime::Variant* variant = nullptr;
  std::string key_hex; // specjit_variant_info's strings live as long as the handle
  std::string variant_json;
};

struct specjit_kernel {
  std::atomic<uint32_t> tag{static_cast<uint32_t>(specjit::capi::HandleTag::kernel)};
  specjit_engine* owner = nullptr;
  specjit::runtime::Engine* engine = nullptr;
  specjit::runtime::KernelId id;
  std::string name; // the kernel id, for messages
  std::vector<std::string> param_names;
  std::mutex mutex; // guards `variants`
  llvm::DenseMap<const specjit::runtime::Variant*, specjit_variant*> variants;
};

struct specjit_engine {
  std::atomic<uint32_t> tag{static_cast<uint32_t>(specjit::capi::HandleTag::engine)};
  std::unique_ptr<specjit::runtime::Engine> engine;
  std::mutex mutex; // guards `kernels`
  std::vector<specjit_kernel*> kernels;
};

namespace specjit::capi {

// Handle lifetimes (handles.cpp keeps the registry of live engines).
specjit_settings* new_settings();
specjit_engine* new_engine(std::unique_ptr<runtime::Engine> engine);
void destroy_engine(specjit_engine* engine); // tombstones it and its kernels and variants
bool engine_is_live(const specjit_engine* engine);
// The handle for a kernel the engine registered: the same one for the same KernelId.
specjit_kernel* kernel_handle(specjit_engine& engine, runtime::KernelId id);
// The handle for one of the kernel's variants: the same one for the same variant.
specjit_variant* variant_handle(specjit_kernel& kernel, const runtime::Variant& variant);

// The checks every entry point starts with: an error naming `function` and the argument.
llvm::Error check_engine(const specjit_engine* engine, const char* function);
llvm::Error check_settings(const specjit_settings* settings, const char* function);
// The hot path's checks: inline, one load.
llvm::Error variant_check_failed(const specjit_variant* variant, const char* function);
inline llvm::Error check_variant(const specjit_variant* variant, const char* function) {
  if (variant != nullptr && variant->tag.load(std::memory_order_relaxed) ==
                                static_cast<uint32_t>(HandleTag::variant)) [[likely]]
    return llvm::Error::success();
  return variant_check_failed(variant, function);
}
llvm::Error kernel_check_failed(const specjit_kernel* kernel, const char* function);
inline llvm::Error check_kernel(const specjit_kernel* kernel, const char* function) {
  if (kernel != nullptr && kernel->tag.load(std::memory_order_relaxed) ==
                               static_cast<uint32_t>(HandleTag::kernel)) [[likely]]
    return llvm::Error::success();
  return kernel_check_failed(kernel, function);
}

// A caller-filled struct: non-NULL and its struct_size covers the first version's fields.
llvm::Error struct_check_failed(const void* pointer, size_t struct_size, size_t minimum,
                                const char* function, const char* argument);
inline llvm::Error check_struct(const void* pointer, size_t struct_size, size_t minimum,
                                const char* function, const char* argument) {
  if (pointer != nullptr && struct_size >= minimum) [[likely]]
    return llvm::Error::success();
  return struct_check_failed(pointer, struct_size, minimum, function, argument);
}

} // namespace specjit::capi
