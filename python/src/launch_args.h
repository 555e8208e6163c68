// Kernel arguments, grids and streams from Python objects, packed for specjit_kernel_launch.
// This is the per-launch path: no allocation, no string built, and no Python-level call except
// a tensor's is_cuda and data_ptr() (torch), __dlpack__ (any other DLPack producer) and torch's
// current-stream accessor. Error messages are built only once a check has failed.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>

namespace specjit::python {

namespace nb = nanobind;

inline constexpr size_t k_max_args = 64;

// The packed argument block of one launch: args[i] points at slot i, sizes[i] its width.
struct PackedArgs {
  alignas(16) unsigned char slots[k_max_args][16];
  void* args[k_max_args];
  size_t sizes[k_max_args];
  size_t count = 0;
};

struct TorchHooks;

// Reads one launch's arguments and stream. torch's hooks (its Tensor type, the current-stream
// accessor) are found at most once per launch, and only when an argument that is not an int
// or a float, or the default stream, asks for them: until torch is imported each finding is a
// lookup in sys.modules; after, a flag.
class LaunchReader {
public:
  // Packs args[0..n): a tensor (torch or DLPack, device memory) as its data pointer, an int as
  // int64, a float as float32, a numpy/ctypes scalar as its own bytes. Anything else, or a
  // tensor not in CUDA memory, raises naming the argument's position.
  void pack_args(PyObject* const* args, size_t n, PackedArgs& out);

  // The CUstream of `stream`: None means torch's current stream when torch is imported (the
  // raw accessor torch._C._cuda_getCurrentRawStream, as inductor's generated code uses, asked
  // for the current device), else the default stream; an int is the handle; an object with
  // `cuda_stream` (torch.cuda.Stream) its.
  void* resolve_stream(PyObject* stream);

private:
  const TorchHooks& torch();
  const TorchHooks* m_torch = nullptr;
};

// A grid or block: an int or a sequence of 1-3 ints in [1, 2^31); `what` names it in errors.
void read_dims(nb::handle dims, const char* what, uint32_t out[3]);

// LaunchReader().resolve_stream(stream), for the ops.
void* resolve_stream(nb::handle stream);

} // namespace specjit::python
