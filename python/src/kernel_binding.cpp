#include "handles.h"
#include "launch.h"
#include "launch_args.h"
#include "status.h"

#include <nanobind/stl/string.h>

#include <Python.h>

namespace specjit::python {
namespace {

std::string text(nb::handle value) { return nb::cast<std::string>(nb::str(value)); }

// The cold half of read_int: conversions through __index__ and every error message.
[[gnu::noinline]] int64_t read_int_slow(nb::handle value, const NativeKernel& k, size_t i) {
  auto what = [&] { return k.id + ": value of " + text(k.names[i]); };
  if (!PyLong_Check(value.ptr()) && !PyIndex_Check(value.ptr()))
    invalid_argument(what() + ": expected an int, got a " +
                     nb::cast<std::string>(nb::type_name(value.type())));
  nb::object index = nb::steal(PyNumber_Index(value.ptr()));
  if (!index.is_valid())
    throw nb::python_error();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow)
    invalid_argument(what() + ": outside int64");
  return v;
}

// Value i of k: an exact int is read in place; anything else (and every error) out of line.
inline int64_t read_int(PyObject* value, const NativeKernel& k, size_t i) {
  if (PyLong_CheckExact(value)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (!overflow)
      return v;
  }
  return read_int_slow(value, k, i);
}

[[noreturn]] void missing_value(const NativeKernel& k, size_t i) {
  invalid_argument(k.id + ": missing the value of parameter '" + text(k.names[i]) +
                   "' (values={...})");
}

// The dict holds a key that names no parameter: find it for the message.
[[noreturn]] void unknown_value(const NativeKernel& k, nb::handle values) {
  for (auto [key, value] : nb::borrow<nb::dict>(values)) {
    bool known = false;
    for (const auto& name : k.names)
      known = known || name.equal(key);
    if (!known)
      invalid_argument(k.id + ": no parameter named '" + text(key) + "'");
  }
  invalid_argument(k.id + ": the values changed while they were read");
}

// The common dict, read without a lookup: its keys are the kernel's own (interned) name
// objects, as a literal {"BLOCK": 128} gives, with exact ints as values. False for anything
// else (other key objects, other values, a missing value): the lookup path then decides, and
// raises.
bool read_dict_by_identity(const NativeKernel& k, PyObject* dict, int64_t* out) {
  size_t n = k.names.size();
  uint64_t seen = 0;
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    size_t i = 0;
    while (i < n && k.names[i].ptr() != key)
      ++i;
    if (i == n || !PyLong_CheckExact(value))
      return false;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow)
      return false;
    out[i] = v;
    seen |= uint64_t(1) << i;
  }
  for (size_t i = 0; i < n; ++i)
    if (!(seen >> i & 1)) {
      if (!k.dynamic[i])
        return false;
      out[i] = 0;
    }
  return true;
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

// The native method, in the order of its first form: values first, args one sequence.
void launch_method(NativeKernel& k, nb::handle values, nb::handle grid, nb::handle block,
                   nb::handle args, nb::handle shared_bytes, nb::handle stream) {
  LaunchDims dims = read_launch_dims(grid, block);
  nb::object items =
      PyTuple_Check(args.ptr()) ? nb::borrow(args) : nb::steal(PySequence_Tuple(args.ptr()));
  if (!items.is_valid())
    throw nb::python_error();
  launch(k, values.ptr(), dims, &PyTuple_GET_ITEM(items.ptr(), 0),
         static_cast<size_t>(PyTuple_GET_SIZE(items.ptr())), shared_bytes.ptr(), stream.ptr());
}

} // namespace

void NativeKernel::read_values(nb::handle values, int64_t* out) const {
  size_t n = names.size();
  PyObject* p = values.ptr();
  if (PyDict_Check(p)) {
    if (read_dict_by_identity(*this, p, out))
      return;
    size_t found = 0;
    for (size_t i = 0; i < n; ++i) {
      // Held: reading a value may run its __index__, which may change the dict.
      nb::object value = nb::borrow(PyDict_GetItemWithError(p, names[i].ptr()));
      if (value.is_valid()) {
        out[i] = read_int(value.ptr(), *this, i);
        ++found;
      } else if (PyErr_Occurred()) {
        throw nb::python_error();
      } else if (dynamic[i]) {
        out[i] = 0;
      } else {
        missing_value(*this, i);
      }
    }
    if (found != static_cast<size_t>(PyDict_GET_SIZE(p)))
      unknown_value(*this, values);
    return;
  }
  if (p == Py_None) {
    for (size_t i = 0; i < n; ++i) {
      if (!dynamic[i])
        missing_value(*this, i);
      out[i] = 0;
    }
    return;
  }
  nb::object items = nb::steal(PySequence_Tuple(p));
  if (!items.is_valid()) {
    PyErr_Clear();
    invalid_argument(id + ": values must be a dict {name: int}, a sequence or None, not a " +
                     nb::cast<std::string>(nb::type_name(values.type())));
  }
  size_t given = static_cast<size_t>(PyTuple_GET_SIZE(items.ptr()));
  if (given != n)
    invalid_argument(id + ": " + std::to_string(given) + " values for " + std::to_string(n) +
                     " parameters");
  for (size_t i = 0; i < n; ++i)
    out[i] = read_int(PyTuple_GET_ITEM(items.ptr(), i), *this, i);
}

void bind_kernel(nb::module_& m) {
  nb::class_<NativeKernel>(m, "NativeKernel")
      .def_ro("id", &NativeKernel::id)
      .def("prepare",
           [](NativeKernel& k, nb::handle v) { return lookup(k, v, specjit_kernel_prepare); })
      .def("get", [](NativeKernel& k, nb::handle v) { return lookup(k, v, specjit_kernel_get); })
      .def("launch", &launch_method, nb::arg("values").none(), nb::arg("grid"), nb::arg("block"),
           nb::arg("args"), nb::arg("shared_bytes") = 0, nb::arg("stream").none() = nb::none());
}

} // namespace specjit::python
