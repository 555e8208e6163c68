#include "status.h"

namespace specjit::python {
namespace {
// Never destroyed: a static nb::object would be released by C++'s exit-time destructors,
// after the interpreter has been finalized.
nb::object& error_factory() {
  static nb::object* factory = new nb::object();
  return *factory;
}
} // namespace

void throw_status(specjit_status status) {
  const char* message = specjit_last_error();
  throw StatusError(status, message && *message ? message : specjit_status_name(status));
}

void invalid_argument(std::string message) {
  throw StatusError(SPECJIT_ERROR_INVALID_ARGUMENT, std::move(message));
}

void set_error_factory(nb::object factory) { error_factory() = std::move(factory); }

void set_python_error(const StatusError& e) noexcept {
  if (!error_factory().is_valid()) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return;
  }
  PyObject* exc =
      PyObject_CallFunction(error_factory().ptr(), "is", static_cast<int>(e.status), e.what());
  if (!exc)
    return; // the factory's own error is the one raised
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
  Py_DECREF(exc);
}

void set_python_error_from_current() noexcept {
  try {
    throw;
  } catch (const StatusError& e) {
    set_python_error(e);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "specjit: unknown C++ exception");
  }
}

} // namespace specjit::python
