#include "support/error.h"

namespace specjit {

char SpecjitError::ID = 0;

llvm::StringRef errc_name(Errc code) {
  switch (code) {
  case Errc::invalid_argument: return "invalid argument";
  case Errc::not_found: return "not found";
  case Errc::io: return "i/o error";
  case Errc::corrupt: return "corrupt data";
  case Errc::unsupported: return "unsupported";
  case Errc::strict_violation: return "strict mode violation";
  case Errc::timeout: return "timeout";
  }
  return "error";
}

void SpecjitError::log(llvm::raw_ostream& os) const { os << m_message; }

std::error_code SpecjitError::convertToErrorCode() const {
  return std::make_error_code(std::errc::invalid_argument);
}

ErrorSummary summarize(llvm::Error error) {
  ErrorSummary summary;
  llvm::handleAllErrors(
      std::move(error),
      [&](const SpecjitError& e) {
        summary.code = e.code();
        summary.message = e.message();
      },
      [&](const llvm::ErrorInfoBase& e) { summary.message = e.message(); });
  return summary;
}

} // namespace specjit
