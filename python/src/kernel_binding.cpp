#include "handles.h"
#include "launch_args.h"
#include "status.h"

#include <nanobind/stl/string.h>

#include <Python.h>

namespace specjit::python {
namespace {

constexpr size_t k_max_params = 32;

int64_t read_int(nb::handle value, const std::string& what) {
  if (!PyLong_Check(value.ptr()) && !PyIndex_Check(value.ptr()))
    invalid_argument(what + ": expected an int, got a " +
                     nb::cast<std::string>(nb::type_name(value.type())));
  int overflow = 0;
  nb::object index = nb::steal(PyNumber_Index(value.ptr()));
  if (!index.is_valid())
    throw nb::python_error();
  long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow)
    invalid_argument(what + ": outside int64");
  return v;
}

nb::dict info(const specjit_variant* variant) {
  specjit_variant_info i{sizeof i};
  check(specjit_variant_get_info(variant, &i));
  static const char* const sources[] = {"compiled", "disk", "memory"};
  nb::dict d;
  d["kernel"] = i.kernel;
  d["name_expression"] = i.name_expression;
  d["key"] = i.key;
  d["variant_json"] = i.variant_json;
  d["source"] = (i.source >= 0 && i.source <= 2) ? sources[i.source] : "unknown";
  d["registers"] = i.registers;
  d["spill_bytes"] = i.spill_bytes;
  d["shared_bytes"] = i.shared_bytes;
  d["compile_ms"] = i.compile_ms;
  return d;
}

using Lookup = specjit_status (*)(specjit_kernel*, const int64_t*, size_t,
                                  const specjit_variant**);

nb::dict lookup(NativeKernel& k, nb::handle values, Lookup fn) {
  int64_t v[k_max_params];
  k.read_values(values, v);
  const specjit_variant* variant = nullptr;
  {
    nb::gil_scoped_release release;
    check(fn(k.handle, v, k.names.size(), &variant));
  }
  return info(variant);
}

// The hot path: values, dims, stream and arguments read in C++, one C call, the GIL released
// around it because a miss compiles (hundreds of milliseconds) and other threads may run.
void launch(NativeKernel& k, nb::handle values, nb::handle grid, nb::handle block,
            nb::handle args, uint32_t shared_bytes, nb::handle stream) {
  int64_t v[k_max_params];
  k.read_values(values, v);
  specjit_launch_config config{sizeof config};
  read_dims(grid, "grid", config.grid);
  read_dims(block, "block", config.block);
  config.shared_bytes = shared_bytes;
  config.stream = resolve_stream(stream);
  PackedArgs packed;
  pack_args(args, packed);
  specjit_status status;
  {
    nb::gil_scoped_release release;
    status = specjit_kernel_launch(k.handle, v, k.names.size(), &config, packed.args,
                                   packed.sizes, packed.count);
  }
  check(status);
}

} // namespace

void NativeKernel::read_values(nb::handle values, int64_t* out) const {
  size_t n = names.size();
  if (n > k_max_params)
    invalid_argument(id + ": more than " + std::to_string(k_max_params) + " parameters");
  if (PyDict_Check(values.ptr())) {
    size_t found = 0;
    for (size_t i = 0; i < n; ++i) {
      PyObject* value = PyDict_GetItem(values.ptr(), names[i].ptr());
      if (value) {
        out[i] = read_int(value, id + ": value of " + nb::cast<std::string>(names[i]));
        ++found;
      } else if (dynamic[i]) {
        out[i] = 0;
      } else {
        invalid_argument(id + ": missing the value of parameter '" +
                         nb::cast<std::string>(names[i]) + "' (values={...})");
      }
    }
    if (found != static_cast<size_t>(PyDict_Size(values.ptr())))
      for (auto [key, value] : nb::borrow<nb::dict>(values)) {
        bool known = false;
        for (const auto& name : names)
          known = known || name.equal(key);
        if (!known)
          invalid_argument(id + ": no parameter named '" + nb::cast<std::string>(nb::str(key)) +
                           "'");
      }
    return;
  }
  if (values.is_none()) {
    for (size_t i = 0; i < n; ++i) {
      if (!dynamic[i])
        invalid_argument(id + ": missing the value of parameter '" +
                         nb::cast<std::string>(names[i]) + "' (values={...})");
      out[i] = 0;
    }
    return;
  }
  if (nb::len(values) != n)
    invalid_argument(id + ": " + std::to_string(nb::len(values)) + " values for " +
                     std::to_string(n) + " parameters");
  for (size_t i = 0; i < n; ++i)
    out[i] = read_int(values[i], id + ": value of " + nb::cast<std::string>(names[i]));
}

void bind_kernel(nb::module_& m) {
  nb::class_<NativeKernel>(m, "NativeKernel")
      .def_ro("id", &NativeKernel::id)
      .def("prepare", [](NativeKernel& k, nb::handle v) { return lookup(k, v, specjit_kernel_prepare); })
      .def("get", [](NativeKernel& k, nb::handle v) { return lookup(k, v, specjit_kernel_get); })
      .def("launch", &launch, nb::arg("values").none(), nb::arg("grid"), nb::arg("block"),
           nb::arg("args"), nb::arg("shared_bytes") = 0, nb::arg("stream") = nb::none());
}

} // namespace specjit::python
