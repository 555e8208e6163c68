#include "support/error.h"

namespace specjit {

char SpecjitError::ID = 0;

llvm::StringRef errc_name(Errc code) {
  switch (code) {
  case Errc::invalid_argument:
    return "invalid argument";
  case Errc::not_found:
    return "not found";
  case Errc::io:
    return "i/o error";
  case Errc::corrupt:
    return "corrupt data";
  case Errc::unsupported:
    return "unsupported";
  case Errc::strict_violation:
    return "strict mode violation";
  case Errc::timeout:
    return "timeout";
  case Errc::compile_failed:
    return "compile failed";
  case Errc::driver:
    return "driver error";
  }
  return "error";
}

namespace {
class Category : public std::error_category {
public:
  const char* name() const noexcept override { return "specjit"; }
  std::string message(int code) const override { return errc_name(static_cast<Errc>(code)).str(); }
};
} // namespace

const std::error_category& specjit_category() {
  static const Category category;
  return category;
}

std::error_code make_error_code(Errc code) { return {static_cast<int>(code), specjit_category()}; }

void SpecjitError::log(llvm::raw_ostream& os) const { os << m_message; }

std::error_code SpecjitError::convertToErrorCode() const { return make_error_code(m_code); }

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
