// The ids of an op's kernel definitions in the engine a thread used last, so that the launch
// path skips add_kernel's comparison of definitions. Not part of the public API.
#pragma once

#include "runtime/engine.h"

#include <llvm/ADT/ArrayRef.h>

#include <array>
#include <cstdint>

namespace specjit::ops::common {

// One per list of N definitions, as a thread_local. The engine is recognized by its
// process-unique instance id, never by its address (a later engine may reuse it).
template <size_t N> class KernelIds {
public:
  // The id of definition `index` in `engine`. `defs()` returns the N definitions (the same ones
  // on every call); it is called, and they are registered, only for an engine not seen last.
  template <class Defs>
  llvm::Expected<runtime::KernelId> get(runtime::Engine& engine, size_t index, Defs&& defs) {
    if (m_engine != engine.instance_id())
      if (llvm::Error error = register_all(engine, defs()))
        return error;
    return m_ids[index];
  }

private:
  llvm::Error register_all(runtime::Engine& engine, llvm::ArrayRef<runtime::KernelDef> defs) {
    for (size_t i = 0; i < N; ++i) {
      auto id = engine.add_kernel(defs[i]);
      if (!id)
        return id.takeError();
      m_ids[i] = *id;
    }
    m_engine = engine.instance_id();
    return llvm::Error::success();
  }

  uint64_t m_engine = 0; // 0: none yet (instance ids start at 1)
  std::array<runtime::KernelId, N> m_ids{};
};

} // namespace specjit::ops::common
