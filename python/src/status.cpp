#include "status.h"

namespace specjit::python {

void check(specjit_status status) {
  if (status == SPECJIT_OK)
    return;
  const char* message = specjit_last_error();
  throw StatusError(status, message && *message ? message : specjit_status_name(status));
}

void invalid_argument(std::string message) {
  throw StatusError(SPECJIT_ERROR_INVALID_ARGUMENT, std::move(message));
}

} // namespace specjit::python
