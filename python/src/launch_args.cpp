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

std::string arg_name(size_t i) { return "argument " + std::to_string(i); }

// torch's Tensor type and raw-stream accessors, looked up once torch is imported (never
// imported from here: a process without torch pays nothing).
struct TorchHooks {
  PyObject* tensor_type = nullptr;
  PyObject* get_device = nullptr;
  PyObject* raw_stream = nullptr;
  bool ready = false;
};

TorchHooks& torch_hooks() {
  static TorchHooks hooks;
  if (hooks.ready)
    return hooks;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
  if (!torch)
    return hooks;
  nb::handle t(torch);
  if (!nb::hasattr(t, "Tensor") || !nb::hasattr(t, "_C"))
    return hooks; // torch is still importing
  nb::object c = t.attr("_C");
  hooks.tensor_type = t.attr("Tensor").inc_ref().ptr();
  if (nb::hasattr(c, "_cuda_getCurrentRawStream")) {
    hooks.get_device = c.attr("_cuda_getDevice").inc_ref().ptr();
    hooks.raw_stream = c.attr("_cuda_getCurrentRawStream").inc_ref().ptr();
  }
  hooks.ready = true;
  return hooks;
}

void put(PackedArgs& out, size_t i, const void* bytes, size_t size) {
  std::memcpy(out.slots[i], bytes, size);
  out.args[i] = out.slots[i];
  out.sizes[i] = size;
}

uint64_t torch_pointer(nb::handle tensor, size_t i) {
  if (!nb::cast<bool>(tensor.attr("is_cuda")))
    invalid_argument(arg_name(i) + ": a tensor on the " +
                     nb::cast<std::string>(nb::str(tensor.attr("device"))) +
                     ", the kernel needs a CUDA tensor");
  return nb::cast<uint64_t>(tensor.attr("data_ptr")());
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

void pack_scalar_buffer(nb::handle arg, size_t i, PackedArgs& out) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg.ptr(), &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    invalid_argument(arg_name(i) + ": a " + nb::cast<std::string>(nb::type_name(arg.type())) +
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

void pack_one(nb::handle arg, size_t i, PackedArgs& out) {
  PyObject* p = arg.ptr();
  TorchHooks& torch = torch_hooks();
  if (torch.tensor_type && PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(torch.tensor_type))) {
    uint64_t ptr = torch_pointer(arg, i);
    put(out, i, &ptr, sizeof ptr);
  } else if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow)
      invalid_argument(arg_name(i) + ": an int outside int64; pass a numpy scalar of the width");
    int64_t value = v;
    put(out, i, &value, sizeof value);
  } else if (PyFloat_Check(p)) {
    float value = static_cast<float>(PyFloat_AS_DOUBLE(p));
    put(out, i, &value, sizeof value);
  } else if (nb::hasattr(arg, "__dlpack__")) {
    uint64_t ptr = dlpack_pointer(arg, i);
    put(out, i, &ptr, sizeof ptr);
  } else {
    pack_scalar_buffer(arg, i, out);
  }
}

} // namespace

void pack_args(nb::handle args, PackedArgs& out) {
  size_t n = nb::len(args);
  if (n > k_max_args)
    invalid_argument(std::to_string(n) + " kernel arguments; at most " +
                     std::to_string(k_max_args));
  for (size_t i = 0; i < n; ++i)
    pack_one(args[i], i, out);
  out.count = n;
}

void read_dims(nb::handle dims, const char* what, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  auto one = [&](nb::handle v, size_t axis) {
    if (!PyLong_Check(v.ptr()))
      invalid_argument(std::string(what) + ": expected ints, got a " +
                       nb::cast<std::string>(nb::type_name(v.type())));
    long long x = PyLong_AsLongLong(v.ptr());
    if (x < 1 || x > 0x7fffffffLL)
      invalid_argument(std::string(what) + "[" + std::to_string(axis) + "] = " +
                       std::to_string(x) + "; must be in [1, 2^31)");
    out[axis] = static_cast<uint32_t>(x);
  };
  if (PyLong_Check(dims.ptr()))
    return one(dims, 0);
  if (!PySequence_Check(dims.ptr()) || nb::len(dims) < 1 || nb::len(dims) > 3)
    invalid_argument(std::string(what) + ": an int or a sequence of 1 to 3 ints");
  for (size_t axis = 0; axis < nb::len(dims); ++axis)
    one(dims[axis], axis);
}

void* resolve_stream(nb::handle stream) {
  if (stream.is_none()) {
    TorchHooks& torch = torch_hooks();
    if (!torch.raw_stream)
      return nullptr;
    nb::object device = nb::steal(PyObject_CallNoArgs(torch.get_device));
    if (!device.is_valid())
      throw nb::python_error();
    nb::object raw = nb::steal(PyObject_CallOneArg(torch.raw_stream, device.ptr()));
    if (!raw.is_valid())
      throw nb::python_error();
    return reinterpret_cast<void*>(nb::cast<uintptr_t>(raw));
  }
  if (PyLong_Check(stream.ptr()))
    return reinterpret_cast<void*>(nb::cast<uintptr_t>(stream));
  if (nb::hasattr(stream, "cuda_stream"))
    return reinterpret_cast<void*>(nb::cast<uintptr_t>(stream.attr("cuda_stream")));
  invalid_argument("stream: expected None, an int handle or an object with .cuda_stream, got a " +
                   nb::cast<std::string>(nb::type_name(stream.type())));
}

} // namespace specjit::python
