// One place that turns a specjit_status into a Python exception (specjit.errors maps the code
// to its class; the message is the C library's specjit_last_error()).
#pragma once

#include <specjit/specjit.h>

#include <stdexcept>
#include <string>

namespace specjit::python {

// Thrown by check() and by argument checks; translated to the SpecjitError subclass of status.
struct StatusError : std::runtime_error {
  StatusError(specjit_status status, std::string message)
      : std::runtime_error(std::move(message)), status(status) {}
  specjit_status status;
};

// Throws StatusError carrying the thread's last C error message when status is not OK.
void check(specjit_status status);

// Throws an invalid-argument StatusError with message.
[[noreturn]] void invalid_argument(std::string message);

} // namespace specjit::python
