// Errors shared by every layer: a small typed payload for llvm::Error.
// Layers with richer failures define their own payloads where they are raised
// (jit::CompileError, runtime::CudaError); this one covers the plain cases.
#pragma once

#include <llvm/Support/Error.h>

#include <fmt/format.h>

#include <optional>
#include <string>
#include <system_error>

namespace specjit {

enum class Errc {
  invalid_argument, // the caller passed something the contract forbids
  not_found,        // a named kernel, entry, file or setting does not exist
  io,               // the file system refused (the message names the path and errno text)
  corrupt,          // bytes failed verification
  unsupported,      // a valid request this build or machine cannot serve
  strict_violation, // a compile after Engine::seal() under SPECJIT_STRICT=error
  timeout,
  compile_failed, // the compiler refused a source (jit::CompileError's code)
  driver,         // a CUDA driver call failed (runtime::CudaError's code)
};

llvm::StringRef errc_name(Errc code);

// The error codes of Errc, so that llvm::errorToErrorCode tells every kind apart: SpecjitError
// converts to its own code, jit::CompileError to compile_failed, runtime::CudaError to driver.
const std::error_category& specjit_category();
std::error_code make_error_code(Errc code);

class SpecjitError : public llvm::ErrorInfo<SpecjitError> {
public:
  static char ID;
  SpecjitError(Errc code, std::string message) : m_code(code), m_message(std::move(message)) {}
  Errc code() const { return m_code; }
  std::string message() const override { return m_message; }
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  Errc m_code;
  std::string m_message;
};

inline llvm::Error make_error(Errc code, std::string message) {
  return llvm::make_error<SpecjitError>(code, std::move(message));
}

template <typename... Args>
llvm::Error make_error(Errc code, fmt::format_string<Args...> format, Args&&... args) {
  return make_error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Consumes an error and returns its code (when it is a SpecjitError) and its message.
// For callers that must branch on the kind of failure and tests that check it.
struct ErrorSummary {
  std::optional<Errc> code;
  std::string message;
};
ErrorSummary summarize(llvm::Error error);

} // namespace specjit

template <> struct std::is_error_code_enum<specjit::Errc> : std::true_type {};
