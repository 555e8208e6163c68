// The native classes behind specjit.Engine and specjit.Kernel: owners of the C handles.
#pragma once

#include <specjit/specjit.h>

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

namespace specjit::python {

namespace nb = nanobind;

struct NativeEngine {
  specjit_engine* handle = nullptr;
  explicit NativeEngine(specjit_engine* h) : handle(h) {}
  NativeEngine(const NativeEngine&) = delete;
  NativeEngine& operator=(const NativeEngine&) = delete;
  ~NativeEngine() { specjit_engine_destroy(handle); }
};

struct NativeKernel {
  specjit_kernel* handle = nullptr;
  nb::object engine; // keeps the engine (which owns the kernel) alive
  std::string id;
  std::vector<nb::object> names; // parameter names as interned Python strings, for dict lookups
  std::vector<bool> dynamic;     // a dynamic value never selects a variant; may be left out

  // One value per parameter from a dict {name: int}, a sequence in parameter order, or None
  // (every parameter dynamic). A missing non-dynamic value or an unknown name raises. Writes
  // names.size() values; at most k_max_params.
  void read_values(nb::handle values, int64_t* out) const;
};

inline constexpr size_t k_max_params = 32;

void bind_engine(nb::module_& m);
void bind_kernel(nb::module_& m);
void bind_launch_types(nb::module_& m);
void bind_ops(nb::module_& m);

// A tensor descriptor from the Python layer: (data_ptr, dtype code, shape, strides or None).
struct TensorArg {
  specjit_tensor tensor{};
  int64_t shape[4]{}, strides[4]{};
  bool present = false;
  void read(nb::handle desc, const char* name);
  const specjit_tensor* get() const { return present ? &tensor : nullptr; }
};

} // namespace specjit::python
