// specjit.Kernel's native base (KernelBase: kernel[grid, block] and kernel.launch) and the
// Launcher that kernel[grid, block] returns. These two are plain CPython types, not nanobind
// classes: CPython calls their slots and vectorcall entry points directly, so a launch runs no
// Python frame, builds no *args tuple or **kwargs dict and goes through no overload
// dispatcher (nanobind's __call__ and __getitem__ take CPython's generic slot wrappers).
#include "handles.h"
#include "launch.h"
#include "status.h"

#include <Python.h>
#include <structmember.h>

#include <cstddef>
#include <string>

namespace specjit::python {
namespace {

struct KernelBaseObject {
  PyObject ob_base;
  PyObject* native;     // the NativeKernel object (it owns the C handle); null until _bind
  NativeKernel* kernel; // its C++ object, kept so a launch casts nothing
  PyObject* spare;      // the Launcher kernel[grid, block] returned last, reused when free
};

struct LauncherObject {
  PyObject ob_base;
  vectorcallfunc vectorcall;
  PyObject* native;
  NativeKernel* kernel;
  LaunchDims dims;
};

PyTypeObject* g_launcher_type = nullptr; // never released, as the module is never unloaded

PyObject* intern(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (!s)
    throw nb::python_error();
  return s;
}

// The keyword names of kernel.launch, in its parameter order; a Launcher call takes the last
// three. Interned, so matching a call's keywords compares pointers.
enum Param { p_grid, p_block, p_args, p_values, p_shared_bytes, p_stream, p_count };
PyObject* const* param_names() {
  static PyObject* names[p_count] = {intern("grid"),   intern("block"),        intern("args"),
                                     intern("values"), intern("shared_bytes"), intern("stream")};
  return names;
}

[[noreturn]] void type_error(const std::string& message) {
  PyErr_SetString(PyExc_TypeError, message.c_str());
  throw nb::python_error();
}

// Puts each keyword argument of a vectorcall into out[first..p_count), by name; an unknown
// name, or one already given (by position: out[i] set), raises TypeError as Python would.
void match_keywords(const char* fn, PyObject* const* values, PyObject* kwnames, Param first,
                    PyObject** out) {
  PyObject* const* names = param_names();
  Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int j = first;
    while (j < p_count && names[j] != key)
      ++j;
    if (j == p_count) // not interned: compare the text
      for (j = first; j < p_count && PyUnicode_Compare(names[j], key) != 0; ++j)
        ;
    if (j == p_count)
      type_error(std::string(fn) + "() got an unexpected keyword argument '" +
                 PyUnicode_AsUTF8(key) + "'");
    if (out[j])
      type_error(std::string(fn) + "() got multiple values for argument '" + PyUnicode_AsUTF8(key) +
                 "'");
    out[j] = values[k];
  }
}

const NativeKernel& bound(KernelBaseObject* self) {
  if (!self->kernel)
    invalid_argument("specjit.Kernel: not defined (Kernel.__init__ did not complete)");
  return *self->kernel;
}

// ---- Launcher: kernel[grid, block], called with the kernel's arguments ----

PyObject* launcher_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return guarded([&]() -> PyObject* {
    auto* l = reinterpret_cast<LauncherObject*>(self);
    size_t n = PyVectorcall_NARGS(nargsf);
    PyObject* p[p_count] = {};
    if (kwnames)
      match_keywords("Launcher", args + n, kwnames, p_values, p);
    launch(*l->kernel, p[p_values], l->dims, args, n, p[p_shared_bytes], p[p_stream]);
    Py_RETURN_NONE;
  });
}

void launcher_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_XDECREF(reinterpret_cast<LauncherObject*>(self)->native);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* dims_tuple(const uint32_t d[3]) { return Py_BuildValue("(III)", d[0], d[1], d[2]); }

PyObject* launcher_grid(PyObject* self, void*) {
  return dims_tuple(reinterpret_cast<LauncherObject*>(self)->dims.grid);
}

PyObject* launcher_block(PyObject* self, void*) {
  return dims_tuple(reinterpret_cast<LauncherObject*>(self)->dims.block);
}

PyObject* launcher_repr(PyObject* self) {
  auto* l = reinterpret_cast<LauncherObject*>(self);
  const uint32_t *g = l->dims.grid, *b = l->dims.block;
  return PyUnicode_FromFormat("<specjit.Launcher %s grid=(%u, %u, %u) block=(%u, %u, %u)>",
                              l->kernel->id.c_str(), g[0], g[1], g[2], b[0], b[1], b[2]);
}

PyMemberDef launcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(LauncherObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef launcher_getset[] = {
    {"grid", launcher_grid, nullptr, "the grid, three ints", nullptr},
    {"block", launcher_block, nullptr, "the block, three ints", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// ---- KernelBase: what specjit.Kernel launches through ----

PyObject* kernel_subscript(PyObject* self, PyObject* key) {
  return guarded([&]() -> PyObject* {
    auto* k = reinterpret_cast<KernelBaseObject*>(self);
    const NativeKernel& kernel = bound(k);
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 2)
      invalid_argument("kernel[grid, block]: give a grid and a block");
    LaunchDims dims = read_launch_dims(PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1));
    // kernel[grid, block](...) drops its Launcher at once: when only this kernel still holds
    // the last one (no weak references or GC tracking can see it), it is reused, so that the
    // usual form allocates nothing.
    if (k->spare && Py_REFCNT(k->spare) == 1) {
      reinterpret_cast<LauncherObject*>(k->spare)->dims = dims;
      return Py_NewRef(k->spare);
    }
    auto* l = PyObject_New(LauncherObject, g_launcher_type);
    if (!l)
      return nullptr;
    l->vectorcall = launcher_call;
    l->native = Py_NewRef(k->native);
    l->kernel = const_cast<NativeKernel*>(&kernel);
    l->dims = dims;
    Py_XSETREF(k->spare, Py_NewRef(reinterpret_cast<PyObject*>(l)));
    return reinterpret_cast<PyObject*>(l);
  });
}

// kernel.launch(grid, block, args=(), *, values=None, shared_bytes=0, stream=None)
PyObject* kernel_launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  return guarded([&]() -> PyObject* {
    const NativeKernel& kernel = bound(reinterpret_cast<KernelBaseObject*>(self));
    if (nargs > 3)
      type_error("launch() takes at most 3 positional arguments (grid, block, args), " +
                 std::to_string(nargs) + " were given");
    PyObject* p[p_count] = {};
    for (Py_ssize_t i = 0; i < nargs; ++i)
      p[i] = args[i];
    if (kwnames)
      match_keywords("launch", args + nargs, kwnames, p_grid, p);
    if (!p[p_grid] || !p[p_block])
      type_error(std::string("launch() missing required argument '") +
                 (p[p_grid] ? "block" : "grid") + "'");
    LaunchDims dims = read_launch_dims(p[p_grid], p[p_block]);
    PyObject* const* items = nullptr;
    size_t n = 0;
    nb::object copy;
    if (PyObject* a = p[p_args]; a && PyTuple_Check(a)) {
      items = &PyTuple_GET_ITEM(a, 0);
      n = static_cast<size_t>(PyTuple_GET_SIZE(a));
    } else if (a) {
      copy = nb::steal(PySequence_Tuple(a));
      if (!copy.is_valid()) {
        PyErr_Clear();
        invalid_argument(std::string("args: expected a sequence of kernel arguments, got a ") +
                         Py_TYPE(a)->tp_name);
      }
      items = &PyTuple_GET_ITEM(copy.ptr(), 0);
      n = static_cast<size_t>(PyTuple_GET_SIZE(copy.ptr()));
    }
    launch(kernel, p[p_values], dims, items, n, p[p_shared_bytes], p[p_stream]);
    Py_RETURN_NONE;
  });
}

PyObject* kernel_bind(PyObject* self, PyObject* native) {
  return guarded([&]() -> PyObject* {
    auto* k = reinterpret_cast<KernelBaseObject*>(self);
    if (!nb::isinstance<NativeKernel>(native))
      invalid_argument("KernelBase._bind: expected a NativeKernel");
    Py_CLEAR(k->spare); // it launches the previous kernel
    Py_XSETREF(k->native, Py_NewRef(native));
    k->kernel = nb::inst_ptr<NativeKernel>(native);
    Py_RETURN_NONE;
  });
}

void kernel_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_XDECREF(reinterpret_cast<KernelBaseObject*>(self)->spare);
  Py_XDECREF(reinterpret_cast<KernelBaseObject*>(self)->native);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef kernel_methods[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kernel_launch)),
     METH_FASTCALL | METH_KEYWORDS,
     "launch(grid, block, args=(), *, values=None, shared_bytes=0, stream=None)\n--\n\n"
     "Launches on stream (default: torch's current stream when torch is imported)."},
    {"_bind", kernel_bind, METH_O, "Attaches the NativeKernel that launches go to."},
    {nullptr, nullptr, 0, nullptr}};

PyObject* make_type(PyType_Spec& spec) {
  PyObject* type = PyType_FromSpec(&spec);
  if (!type)
    throw nb::python_error();
  return type;
}

} // namespace

void bind_launch_types(nb::module_& m) {
  static PyType_Slot launcher_slots[] = {
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_dealloc, reinterpret_cast<void*>(launcher_dealloc)},
      {Py_tp_repr, reinterpret_cast<void*>(launcher_repr)},
      {Py_tp_members, launcher_members},
      {Py_tp_getset, launcher_getset},
      {Py_tp_doc, const_cast<char*>("kernel[grid, block]: call it with the kernel's arguments "
                                    "(and values=, shared_bytes=, stream=).")},
      {0, nullptr}};
  static PyType_Spec launcher_spec = {"specjit.Launcher", sizeof(LauncherObject), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
                                          Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                      launcher_slots};
  static PyType_Slot kernel_slots[] = {
      {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
      {Py_tp_dealloc, reinterpret_cast<void*>(kernel_dealloc)},
      {Py_mp_subscript, reinterpret_cast<void*>(kernel_subscript)},
      {Py_tp_methods, kernel_methods},
      {Py_tp_doc, const_cast<char*>("The native base of specjit.Kernel: its launch forms.")},
      {0, nullptr}};
  static PyType_Spec kernel_spec = {"specjit._specjit.KernelBase", sizeof(KernelBaseObject), 0,
                                    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, kernel_slots};
  param_names();
  PyObject* launcher = make_type(launcher_spec);
  g_launcher_type = reinterpret_cast<PyTypeObject*>(launcher);
  m.attr("Launcher") = nb::borrow(launcher); // the module's reference; g_launcher_type's stays
  m.attr("KernelBase") = nb::steal(make_type(kernel_spec));
}

} // namespace specjit::python
