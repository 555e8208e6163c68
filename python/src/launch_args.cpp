#include "launch_args.h"

#include "status.h"

#include <Python.h>

#include <cstring>
#include <string>

namespace specjit::python {
namespace {

// DLPack's C structures (dlpack.h v0.8, the unversioned "dltensor" capsule), read only.
struct DLDevice { int32_t device_type, device_id; };
struct DLDataType { uint8_t code, bits; uint16_t lanes; };
struct DLTensor {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
};
struct DLManagedTensor { DLTensor dl_tensor; void* manager_ctx; void (*deleter)(DLManagedTensor*); };
constexpr int32_t k_dl_cuda = 2, k_dl_cuda_managed = 13;

// Interned attribute names: a lookup by an interned string skips hashing and, mostly, the
// character comparison.
PyObject* interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (!s)
    throw nb::python_error();
  return s;
}
struct Names {
  PyObject* torch = interned("torch");
  PyObject* is_cuda = interned("is_cuda");
  PyObject* data_ptr = interned("data_ptr");
  PyObject* device = interned("device");
  PyObject* dlpack = interned("__dlpack__");
  PyObject* cuda_stream = interned("cuda_stream");
};
const Names& names() {
  static const Names* n = new Names(); // never released: it outlives the interpreter
  return *n;
}

std::string arg_name(size_t i) { return "argument " + std::to_string(i); }

std::string type_name(PyObject* p) { return Py_TYPE(p)->tp_name; }

// The attribute, or null when there is none; any other error propagates.
PyObject* optional_attribute(PyObject* p, PyObject* name) {
  PyObject* a = PyObject_GetAttr(p, name);
  if (!a) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
      throw nb::python_error();
    PyErr_Clear();
  }
  return a;
}

} // namespace

// torch's Tensor type, its is_cuda getter and data_ptr method as the type defines them (so an
// exact torch.Tensor costs two C calls and no attribute lookup), and the raw-stream accessor;
// looked up once torch is imported (never imported from here: a process without torch pays
// nothing for it).
struct TorchHooks {
  PyTypeObject* tensor_type = nullptr;
  PyObject* is_cuda = nullptr;  // a data descriptor (torch's getset), or null: ask the tensor
  PyObject* data_ptr = nullptr; // a method descriptor, or null: ask the tensor
  PyObject* raw_stream = nullptr;
  PyObject* current_device = nullptr; // -1, the accessor's "the current device"
  bool ready = false;
};

namespace {

TorchHooks& torch_hooks() {
  static TorchHooks hooks;
  if (hooks.ready)
    return hooks;
  PyObject* torch = PyDict_GetItemWithError(PyImport_GetModuleDict(), names().torch);
  if (!torch)
    return hooks;
  nb::handle t(torch);
  if (!nb::hasattr(t, "Tensor") || !nb::hasattr(t, "_C"))
    return hooks; // torch is still importing
  nb::object c = t.attr("_C");
  nb::object tensor = t.attr("Tensor");
  if (!PyType_Check(tensor.ptr()))
    return hooks;
  hooks.tensor_type = reinterpret_cast<PyTypeObject*>(tensor.inc_ref().ptr());
  PyObject* is_cuda = optional_attribute(tensor.ptr(), names().is_cuda);
  if (is_cuda && Py_TYPE(is_cuda)->tp_descr_get && Py_TYPE(is_cuda)->tp_descr_set)
    hooks.is_cuda = is_cuda;
  else
    Py_XDECREF(is_cuda);
  PyObject* data_ptr = optional_attribute(tensor.ptr(), names().data_ptr);
  if (data_ptr && PyType_HasFeature(Py_TYPE(data_ptr), Py_TPFLAGS_METHOD_DESCRIPTOR))
    hooks.data_ptr = data_ptr;
  else
    Py_XDECREF(data_ptr);
  if (nb::hasattr(c, "_cuda_getCurrentRawStream")) {
    hooks.raw_stream = c.attr("_cuda_getCurrentRawStream").inc_ref().ptr();
    hooks.current_device = PyLong_FromLong(-1);
  }
  hooks.ready = true;
  return hooks;
}

// Addresses and handles are read with PyLong_AsUnsignedLong, a digit loop (CPython's
// unsigned long long reader goes through its generic byte-array conversion).
static_assert(sizeof(unsigned long) == sizeof(uint64_t), "an LP64 platform");

void put(PackedArgs& out, size_t i, const void* bytes, size_t size) {
  std::memcpy(out.slots[i], bytes, size);
  out.args[i] = out.slots[i];
  out.sizes[i] = size;
}

nb::object checked(PyObject* result) {
  if (!result)
    throw nb::python_error();
  return nb::steal(result);
}

[[noreturn]] void not_cuda(PyObject* tensor, size_t i) {
  nb::object device = checked(PyObject_GetAttr(tensor, names().device));
  invalid_argument(arg_name(i) + ": a tensor on the " + nb::cast<std::string>(nb::str(device)) +
                   ", the kernel needs a CUDA tensor");
}

// tensor.is_cuda and tensor.data_ptr(). An exact torch.Tensor goes to the type's own getter
// and method (a subclass may override either, so it is asked by name; an attribute set on one
// tensor object is not consulted); both still honour __torch_function__ modes, as they are
// the functions attribute access reaches.
nb::object tensor_is_cuda(const TorchHooks& torch, PyObject* tensor, bool exact) {
  if (exact && torch.is_cuda)
    return checked(
        Py_TYPE(torch.is_cuda)
            ->tp_descr_get(torch.is_cuda, tensor, reinterpret_cast<PyObject*>(Py_TYPE(tensor))));
  return checked(PyObject_GetAttr(tensor, names().is_cuda));
}

nb::object tensor_data_ptr(const TorchHooks& torch, PyObject* tensor, bool exact) {
  if (exact && torch.data_ptr)
    return checked(PyObject_Vectorcall(torch.data_ptr, &tensor, 1, nullptr));
  return checked(PyObject_CallMethodNoArgs(tensor, names().data_ptr));
}

uint64_t torch_pointer(const TorchHooks& torch, PyObject* tensor, size_t i) {
  bool exact = Py_TYPE(tensor) == torch.tensor_type;
  nb::object is_cuda = tensor_is_cuda(torch, tensor, exact);
  if (is_cuda.ptr() != Py_True) {
    int truth = PyObject_IsTrue(is_cuda.ptr());
    if (truth < 0)
      throw nb::python_error();
    if (!truth)
      not_cuda(tensor, i);
  }
  nb::object ptr = tensor_data_ptr(torch, tensor, exact);
  unsigned long value = PyLong_AsUnsignedLong(ptr.ptr());
  if (value == static_cast<unsigned long>(-1) && PyErr_Occurred())
    throw nb::python_error();
  return value;
}

uint64_t dlpack_pointer(nb::handle tensor, size_t i) {
  nb::tuple device = nb::cast<nb::tuple>(tensor.attr("__dlpack_device__")());
  int type = nb::cast<int>(device[0]);
  if (type != k_dl_cuda && type != k_dl_cuda_managed)
    invalid_argument(arg_name(i) + ": a tensor in DLPack device type " + std::to_string(type) +
                     " (1 is the CPU), the kernel needs CUDA memory");
  nb::object capsule = tensor.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed)
    throw nb::python_error();
  // The capsule is not consumed: its destructor returns it to the producer, and `tensor` keeps
  // the memory alive for the launch.
  return reinterpret_cast<uint64_t>(managed->dl_tensor.data) + managed->dl_tensor.byte_offset;
}

void pack_scalar_buffer(PyObject* arg, size_t i, PackedArgs& out) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    invalid_argument(arg_name(i) + ": a " + type_name(arg) +
                     "; expected a tensor, an int, a float or a numpy/ctypes scalar");
  }
  size_t size = static_cast<size_t>(view.len);
  if (size == 0 || size > sizeof out.slots[i]) {
    PyBuffer_Release(&view);
    invalid_argument(arg_name(i) + ": a " + std::to_string(size) +
                     "-byte buffer; only scalars of 1-16 bytes are passed by value");
  }
  put(out, i, view.buf, size);
  PyBuffer_Release(&view);
}

void pack_int(PyObject* p, size_t i, PackedArgs& out) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
  if (overflow)
    invalid_argument(arg_name(i) + ": an int outside int64; pass a numpy scalar of the width");
  int64_t value = v;
  put(out, i, &value, sizeof value);
}

void pack_float(PyObject* p, size_t i, PackedArgs& out) {
  float value = static_cast<float>(PyFloat_AS_DOUBLE(p));
  put(out, i, &value, sizeof value);
}

// Exact types first (int, float, torch.Tensor: what launches pass), then the same kinds by
// subclass, then DLPack producers and scalars with a buffer. torch is asked for only past the
// ints and floats.
template <class GetTorch>
void pack_one(GetTorch&& get_torch, PyObject* p, size_t i, PackedArgs& out) {
  PyTypeObject* type = Py_TYPE(p);
  if (type == &PyLong_Type)
    return pack_int(p, i, out);
  if (type == &PyFloat_Type)
    return pack_float(p, i, out);
  const TorchHooks& torch = get_torch();
  if (type == torch.tensor_type ||
      (torch.tensor_type && PyType_IsSubtype(type, torch.tensor_type))) {
    uint64_t ptr = torch_pointer(torch, p, i);
    return put(out, i, &ptr, sizeof ptr);
  }
  if (PyLong_Check(p))
    return pack_int(p, i, out);
  if (PyFloat_Check(p))
    return pack_float(p, i, out);
  if (nb::object dlpack = nb::steal(optional_attribute(p, names().dlpack)); dlpack.is_valid()) {
    uint64_t ptr = dlpack_pointer(p, i);
    return put(out, i, &ptr, sizeof ptr);
  }
  pack_scalar_buffer(p, i, out);
}

[[noreturn]] void too_many_args(size_t n) {
  invalid_argument(std::to_string(n) + " kernel arguments; at most " + std::to_string(k_max_args));
}

[[noreturn]] void bad_dims(const char* what) {
  invalid_argument(std::string(what) + ": an int or a sequence of 1 to 3 ints");
}

[[noreturn]] void bad_dim(const char* what, size_t axis, PyObject* v) {
  if (!PyLong_Check(v))
    invalid_argument(std::string(what) + ": expected ints, got a " + type_name(v));
  invalid_argument(std::string(what) + "[" + std::to_string(axis) +
                   "] = " + nb::cast<std::string>(nb::str(v)) + "; must be in [1, 2^31)");
}

uint32_t read_dim(PyObject* v, const char* what, size_t axis) {
  if (!PyLong_Check(v))
    bad_dim(what, axis, v);
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || x < 1 || x > 0x7fffffffLL)
    bad_dim(what, axis, v);
  return static_cast<uint32_t>(x);
}

} // namespace

const TorchHooks& LaunchReader::torch() {
  if (!m_torch)
    m_torch = &torch_hooks();
  return *m_torch;
}

void LaunchReader::pack_args(PyObject* const* args, size_t n, PackedArgs& out) {
  if (n > k_max_args)
    too_many_args(n);
  for (size_t i = 0; i < n; ++i)
    pack_one([this]() -> const TorchHooks& { return torch(); }, args[i], i, out);
  out.count = n;
}

void read_dims(nb::handle dims, const char* what, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  PyObject* p = dims.ptr();
  if (PyLong_Check(p)) {
    out[0] = read_dim(p, what, 0);
    return;
  }
  if (PyTuple_Check(p)) {
    Py_ssize_t n = PyTuple_GET_SIZE(p);
    if (n < 1 || n > 3)
      bad_dims(what);
    for (Py_ssize_t axis = 0; axis < n; ++axis)
      out[axis] = read_dim(PyTuple_GET_ITEM(p, axis), what, static_cast<size_t>(axis));
    return;
  }
  if (!PySequence_Check(p) || PyUnicode_Check(p) || PyBytes_Check(p))
    bad_dims(what);
  nb::object items = checked(PySequence_Tuple(p));
  read_dims(items, what, out);
}

void* LaunchReader::resolve_stream(PyObject* p) {
  if (p == Py_None) {
    const TorchHooks& torch = this->torch();
    if (!torch.raw_stream)
      return nullptr;
    // -1: the current device's current stream in one call (torch's getCurrentCUDAStream(-1)),
    // instead of asking for the device first.
    nb::object raw = checked(PyObject_CallOneArg(torch.raw_stream, torch.current_device));
    void* handle = PyLong_AsVoidPtr(raw.ptr());
    if (!handle && PyErr_Occurred())
      throw nb::python_error();
    return handle;
  }
  nb::object handle;
  if (PyLong_Check(p)) {
    handle = nb::borrow(p);
  } else {
    handle = nb::steal(optional_attribute(p, names().cuda_stream));
    if (!handle.is_valid())
      invalid_argument("stream: expected None, an int handle or an object with .cuda_stream, "
                       "got a " +
                       type_name(p));
    if (!PyLong_Check(handle.ptr()))
      invalid_argument("stream: .cuda_stream is a " + type_name(handle.ptr()) + ", not an int");
  }
  unsigned long value = PyLong_AsUnsignedLong(handle.ptr());
  if (value == static_cast<unsigned long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    invalid_argument("stream: " + nb::cast<std::string>(nb::str(handle)) +
                     " is not a stream handle (an unsigned 64-bit value)");
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(value));
}

void* resolve_stream(nb::handle stream) { return LaunchReader().resolve_stream(stream.ptr()); }

} // namespace specjit::python
