#include "launch.h"

#include "launch_args.h"
#include "status.h"

#include <string>

namespace specjit::python {

LaunchDims read_launch_dims(nb::handle grid, nb::handle block) {
  LaunchDims dims;
  read_dims(grid, "grid", dims.grid);
  read_dims(block, "block", dims.block);
  return dims;
}

uint32_t read_shared_bytes(PyObject* shared_bytes) {
  if (!shared_bytes || shared_bytes == Py_None)
    return 0;
  if (PyLong_Check(shared_bytes)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(shared_bytes, &overflow);
    if (!overflow && v >= 0 && v <= 0xffffffffLL)
      return static_cast<uint32_t>(v);
    invalid_argument("shared_bytes = " + nb::cast<std::string>(nb::str(shared_bytes)) +
                     "; must be in [0, 2^32)");
  }
  invalid_argument(std::string("shared_bytes: expected an int, got a ") +
                   Py_TYPE(shared_bytes)->tp_name);
}

void launch(const NativeKernel& k, PyObject* values, const LaunchDims& dims, PyObject* const* args,
            size_t n, PyObject* shared_bytes, PyObject* stream) {
  int64_t v[k_max_params];
  k.read_values(values ? values : Py_None, v);
  specjit_launch_config config{sizeof config};
  for (int axis = 0; axis < 3; ++axis) {
    config.grid[axis] = dims.grid[axis];
    config.block[axis] = dims.block[axis];
  }
  config.shared_bytes = read_shared_bytes(shared_bytes);
  LaunchReader reader;
  config.stream = reader.resolve_stream(stream ? stream : Py_None);
  PackedArgs packed;
  reader.pack_args(args, n, packed);
  specjit_status status;
  PyThreadState* thread = PyEval_SaveThread();
  status = specjit_kernel_launch(k.handle, v, k.names.size(), &config, packed.args, packed.sizes,
                                 packed.count);
  PyEval_RestoreThread(thread);
  check(status);
}

} // namespace specjit::python
