// One place that turns a specjit_status into a Python exception (specjit.errors maps the code
// to its class; the message is the C library's specjit_last_error()).
#pragma once

#include <specjit/specjit.h>

#include <nanobind/nanobind.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace specjit::python {

namespace nb = nanobind;

// Thrown by check() and by argument checks; translated to the SpecjitError subclass of status.
struct StatusError : std::runtime_error {
  StatusError(specjit_status status, std::string message)
      : std::runtime_error(std::move(message)), status(status) {}
  specjit_status status;
};

// Throws StatusError carrying the thread's last C error message.
[[noreturn]] void throw_status(specjit_status status);

// throw_status(status) when status is not OK.
inline void check(specjit_status status) {
  if (status != SPECJIT_OK) [[unlikely]]
    throw_status(status);
}

// Throws an invalid-argument StatusError with message.
[[noreturn]] void invalid_argument(std::string message);

// specjit.errors.from_status(code, message) -> exception instance, set at import.
void set_error_factory(nb::object factory);

// Sets the Python error of e: the factory's exception, or RuntimeError before it is set.
void set_python_error(const StatusError& e) noexcept;

// Sets the Python error of the exception being handled (inside a catch block): a StatusError,
// a pending Python error, or any other C++ exception as RuntimeError.
void set_python_error_from_current() noexcept;

// For entry points called by CPython directly (not through nanobind): runs f, turning a C++
// exception into the Python error and nullptr.
template <class F> PyObject* guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    set_python_error_from_current();
    return nullptr;
  }
}

} // namespace specjit::python
