// A failure kept in a memory-tier slot for the callers that waited on it: every part of the
// resolver's error, rebuilt with its type, so that a waiter can tell a strict refusal
// (Errc::strict_violation), a compile failure (jit::CompileError), a cache fault (Errc::io,
// corrupt, timeout) and a driver error (runtime::CudaError, DriverUnavailable) apart exactly as
// the caller that resolved the slot can. A part of a type this file does not know is kept as a
// SpecjitError (Errc::unsupported) with its message.
#pragma once

#include <llvm/Support/Error.h>

#include <functional>
#include <string>
#include <vector>

namespace specjit::runtime {

class StoredFailure {
public:
  // Keeps what it takes to rebuild each part of `error`, and returns `error` itself.
  llvm::Error record(llvm::Error error);
  // A new error of the recorded parts and types (success when nothing was recorded).
  llvm::Error rebuild() const;
  bool empty() const { return m_parts.empty(); }

private:
  std::vector<std::function<llvm::Error()>> m_parts;
};

} // namespace specjit::runtime
