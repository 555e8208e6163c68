// One launch from Python objects, shared by every launch form (kernel[grid, block](...),
// kernel.launch(...), the native method): values, arguments and stream read in C++, then one
// specjit_kernel_launch with the GIL released, because a miss compiles (hundreds of
// milliseconds) and other threads may run meanwhile.
#pragma once

#include "handles.h"

#include <cstddef>
#include <cstdint>

namespace specjit::python {

// A launch's grid and block, read once (kernel[grid, block] keeps them).
struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
};

LaunchDims read_launch_dims(nb::handle grid, nb::handle block);

// shared_bytes as given (None: 0); anything but an int in [0, 2^32) raises naming it.
uint32_t read_shared_bytes(PyObject* shared_bytes);

// Launches k with args[0..n); values, shared_bytes and stream may be null (None).
void launch(const NativeKernel& k, PyObject* values, const LaunchDims& dims, PyObject* const* args,
            size_t n, PyObject* shared_bytes, PyObject* stream);

} // namespace specjit::python
