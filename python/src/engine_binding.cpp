#include "handles.h"
#include "status.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

namespace specjit::python {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// No overrides: NULL settings, the environment alone.
std::unique_ptr<NativeEngine> create_engine(const Pairs& overrides) {
  specjit_settings* settings = nullptr;
  if (!overrides.empty())
    check(specjit_settings_create(&settings));
  std::unique_ptr<specjit_settings, void (*)(specjit_settings*)> owner(
      settings, [](specjit_settings* s) {
        if (s)
          specjit_settings_destroy(s);
      });
  for (const auto& [name, value] : overrides)
    check(specjit_settings_set(settings, name.c_str(), value.c_str()));
  specjit_engine* engine = nullptr;
  {
    nb::gil_scoped_release release;
    check(specjit_engine_create(settings, &engine));
  }
  return std::make_unique<NativeEngine>(engine);
}

nb::tuple stats(const NativeEngine& engine) {
  specjit_stats s{sizeof s};
  check(specjit_engine_stats(engine.handle, &s));
  return nb::make_tuple(s.requests, s.memory_hits, s.disk_hits, s.compiles, s.failures,
                        s.corrupt_entries, s.write_failures, s.storms);
}

std::vector<const char*> c_strings(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const auto& s : v)
    out.push_back(s.c_str());
  return out;
}

// Arguments as specjit.Kernel normalized them (kernel.py); the C library validates the rest.
NativeKernel* define(nb::object engine_object, const std::string& id, int source_kind,
                     const std::string& source_name, const std::string& source_text,
                     const std::string& function, const Pairs& params,
                     const std::vector<std::string>& include_dirs, const Pairs& headers,
                     const std::vector<std::string>& defines,
                     const std::vector<std::string>& options) {
  auto& engine = nb::cast<NativeEngine&>(engine_object);
  // The launch path reads values into a fixed array.
  if (params.size() > k_max_params)
    invalid_argument(id + ": " + std::to_string(params.size()) + " parameters; at most " +
                     std::to_string(k_max_params));
  std::vector<specjit_param> c_params;
  for (const auto& [name, policy] : params)
    c_params.push_back({name.c_str(), policy.c_str()});
  std::vector<specjit_header> c_headers;
  for (const auto& [name, text] : headers)
    c_headers.push_back({name.c_str(), text.c_str()});
  auto dirs = c_strings(include_dirs), defs = c_strings(defines), opts = c_strings(options);
  specjit_kernel_desc desc{sizeof desc};
  desc.id = id.c_str();
  desc.source_kind = source_kind;
  desc.source_name = source_name.c_str();
  desc.source_text = source_kind == SPECJIT_SOURCE_TEXT ? source_text.c_str() : nullptr;
  desc.function = function.c_str();
  desc.params = c_params.data();
  desc.param_count = c_params.size();
  desc.include_dirs = dirs.data();
  desc.include_dir_count = dirs.size();
  desc.headers = c_headers.data();
  desc.header_count = c_headers.size();
  desc.defines = defs.data();
  desc.define_count = defs.size();
  desc.options = opts.data();
  desc.option_count = opts.size();
  specjit_kernel* handle = nullptr;
  {
    nb::gil_scoped_release release;
    check(specjit_kernel_define(engine.handle, &desc, &handle));
  }
  auto* kernel = new NativeKernel;
  kernel->handle = handle;
  kernel->engine = engine_object;
  kernel->id = id;
  for (const auto& [name, policy] : params) {
    // Interned, as the keys of a literal {"BLOCK": 128} are: a lookup then compares pointers.
    PyObject* interned = PyUnicode_InternFromString(name.c_str());
    if (!interned)
      throw nb::python_error();
    kernel->names.push_back(nb::steal(interned));
    kernel->dynamic.push_back(policy == "dynamic");
  }
  return kernel;
}

} // namespace

void bind_engine(nb::module_& m) {
  nb::class_<NativeEngine>(m, "NativeEngine")
      .def(nb::new_(&create_engine), nb::arg("overrides"))
      .def("seal", [](NativeEngine& e) { check(specjit_engine_seal(e.handle)); })
      .def("stats", &stats);
  m.def("define", &define, nb::rv_policy::take_ownership);
}

} // namespace specjit::python
