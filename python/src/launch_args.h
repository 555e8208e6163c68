// Kernel arguments, grids and streams from Python objects, packed for specjit_kernel_launch.
// This is the per-launch path: no allocation, no Python-level calls except a tensor's
// data_ptr() and is_cuda (torch) or __dlpack__ (any other DLPack producer).
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

// Packs each element of `args`: a tensor (torch or DLPack, device memory) as its data pointer,
// an int as int64, a float as float32, a numpy/ctypes scalar as its own bytes. Anything else,
// or a tensor not in CUDA memory, raises naming the argument's position.
void pack_args(nb::handle args, PackedArgs& out);

// A grid or block: an int or a sequence of 1-3 positive ints; `what` names it in errors.
void read_dims(nb::handle dims, const char* what, uint32_t out[3]);

// The CUstream of `stream`: None means torch's current stream when torch is imported (the raw
// accessor torch._C._cuda_getCurrentRawStream, as inductor's generated code uses), else the
// default stream; an int is the handle; an object with `cuda_stream` (torch.cuda.Stream) its.
void* resolve_stream(nb::handle stream);

} // namespace specjit::python
