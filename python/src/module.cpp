// specjit._specjit: nanobind over the C ABI (include/specjit/specjit.h) and nothing else.
#include "handles.h"
#include "status.h"

#include <nanobind/stl/string.h>

namespace nb = nanobind;
using namespace specjit::python;

NB_MODULE(_specjit, m) {
  m.def("abi_version", &specjit_abi_version);
  m.def("version", [] { return std::string(specjit_version()); });
  m.def("status_name", [](int s) { return std::string(specjit_status_name(specjit_status(s))); });
  m.def("set_error_factory", [](nb::object f) { set_error_factory(std::move(f)); });
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      set_python_error(e);
    }
  });
  bind_engine(m);
  bind_kernel(m);
  bind_launch_types(m);
  bind_ops(m);
}
