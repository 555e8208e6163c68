// specjit._specjit: nanobind over the C ABI (include/specjit/specjit.h) and nothing else.
#include "handles.h"
#include "status.h"

#include <nanobind/stl/string.h>

namespace nb = nanobind;
using namespace specjit::python;

namespace {
// specjit.errors.from_status(code, message) -> exception instance; set at import. Never
// destroyed: a static nb::object would be released by C++'s exit-time destructors, after the
// interpreter has been finalized.
nb::object& error_factory() {
  static nb::object* factory = new nb::object();
  return *factory;
}
} // namespace

NB_MODULE(_specjit, m) {
  m.def("abi_version", &specjit_abi_version);
  m.def("version", [] { return std::string(specjit_version()); });
  m.def("status_name", [](int s) { return std::string(specjit_status_name(specjit_status(s))); });
  m.def("set_error_factory", [](nb::object f) { error_factory() = std::move(f); });
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      if (!error_factory().is_valid()) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return;
      }
      nb::object exc = error_factory()(static_cast<int>(e.status), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  bind_engine(m);
  bind_kernel(m);
  bind_ops(m);
}
