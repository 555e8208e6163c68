#include "runtime/stored_failure.h"

#include "runtime/driver.h"

#include "jit/compiler.h"
#include "support/error.h"

namespace specjit::runtime {

namespace {

// The rebuild of one part. Subclasses before their bases: DriverUnavailable is a SpecjitError.
std::function<llvm::Error()> rebuilder(const llvm::ErrorInfoBase& part) {
  if (part.isA<DriverUnavailable>())
    return [message = part.message()] { return llvm::make_error<DriverUnavailable>(message); };
  if (part.isA<SpecjitError>()) {
    const auto& e = static_cast<const SpecjitError&>(part);
    return [code = e.code(), message = e.message()] { return make_error(code, message); };
  }
  if (part.isA<jit::CompileError>()) {
    const auto& e = static_cast<const jit::CompileError&>(part);
    return
        [stage = e.stage(), result = e.nvrtc_result(), log = e.nvrtc_log(), options = e.options(),
         arch = e.arch(), name = e.name_expression(), context = e.context()] {
          auto copy = std::make_unique<jit::CompileError>(stage, result, log, options, arch, name);
          copy->set_context(context);
          return llvm::Error(std::move(copy));
        };
  }
  if (part.isA<CudaError>()) {
    const auto& e = static_cast<const CudaError&>(part);
    return [result = e.result(), api = e.api(), detail = e.detail()] {
      return llvm::make_error<CudaError>(result, api, detail);
    };
  }
  return [message = part.message()] { return make_error(Errc::unsupported, message); };
}

} // namespace

llvm::Error StoredFailure::record(llvm::Error error) {
  return llvm::handleErrors(std::move(error),
                            [&](std::unique_ptr<llvm::ErrorInfoBase> part) -> llvm::Error {
                              m_parts.push_back(rebuilder(*part));
                              return llvm::Error(std::move(part));
                            });
}

llvm::Error StoredFailure::rebuild() const {
  llvm::Error out = llvm::Error::success();
  for (const auto& part : m_parts)
    out = llvm::joinErrors(std::move(out), part());
  return out;
}

} // namespace specjit::runtime
