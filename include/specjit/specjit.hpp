// A header-only C++17 wrapper over specjit's C ABI (specjit.h): RAII engines and settings,
// kernel definitions from std types, typed variadic launches. It adds no link dependency: the
// installed package is libspecjit.so and these two headers.
//
//   specjit::Engine engine;                                   // SPECJIT_* environment
//   specjit::Kernel scale = engine.define(specjit::KernelSpec::from_text(
//       "scale", "scale.cu", source, "scale", {{"num_tokens", "dynamic"}, {"BLOCK", "exact"}}));
//   scale.launch({num_tokens, 128}, {{blocks, 1, 1}, {128, 1, 1}, 0, stream}, x, y, num_tokens);
//
// Errors are exceptions (specjit::Error: the status and the library's message), see
// docs/c-api.md: a failing call here is a misconfiguration or a missing cache entry, not a
// branch of the hot path, and constructors have no other way to fail. try_launch() is the
// non-throwing launch, for code built without exceptions on its serving path.
#pragma once

#include "specjit/specjit.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace specjit {

class Error : public std::runtime_error {
public:
  Error(specjit_status status, const std::string& message)
      : std::runtime_error(std::string(specjit_status_name(status)) + ": " + message),
        m_status(status) {}
  specjit_status status() const noexcept { return m_status; }

private:
  specjit_status m_status;
};

namespace detail {
inline void check(specjit_status status) {
  if (status != SPECJIT_OK)
    throw Error(status, specjit_last_error());
}
} // namespace detail

inline std::string version() { return specjit_version(); }

class Settings {
public:
  Settings() { detail::check(specjit_settings_create(&m_settings)); }
  ~Settings() { specjit_settings_destroy(m_settings); }
  Settings(const Settings&) = delete;
  Settings& operator=(const Settings&) = delete;
  Settings(Settings&& other) noexcept : m_settings(std::exchange(other.m_settings, nullptr)) {}
  Settings& operator=(Settings&& other) noexcept {
    std::swap(m_settings, other.m_settings);
    return *this;
  }

  // "cache_dir", "log", "strict", "arch", ... (specjit.h); the value is checked here.
  Settings& set(const std::string& name, const std::string& value) {
    detail::check(specjit_settings_set(m_settings, name.c_str(), value.c_str()));
    return *this;
  }
  const specjit_settings* get() const noexcept { return m_settings; }

private:
  specjit_settings* m_settings = nullptr;
};

struct Param {
  std::string name;
  std::string policy; // "dynamic", "exact", "bucketed(pow2)", "divisibility(16)+one", ...
};

struct Header {
  std::string name;
  std::string text;
};

// A kernel definition in std types (specjit_kernel_desc's fields).
struct KernelSpec {
  std::string id;
  specjit_source_kind source_kind = SPECJIT_SOURCE_TEXT;
  std::string source_name;
  std::string source_text;
  std::string function;
  std::vector<Param> params;
  std::vector<std::string> include_dirs;
  std::vector<Header> headers;
  std::vector<std::string> defines;
  std::vector<std::string> options;

  static KernelSpec from_text(std::string id, std::string name, std::string text,
                              std::string function, std::vector<Param> params) {
    KernelSpec spec;
    spec.id = std::move(id);
    spec.source_name = std::move(name);
    spec.source_text = std::move(text);
    spec.function = std::move(function);
    spec.params = std::move(params);
    return spec;
  }
  static KernelSpec from_file(std::string id, std::string path, std::string function,
                              std::vector<Param> params) {
    KernelSpec spec = from_text(std::move(id), std::move(path), {}, std::move(function),
                                std::move(params));
    spec.source_kind = SPECJIT_SOURCE_FILE;
    return spec;
  }
};

struct LaunchConfig {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
  void* stream = nullptr; // a CUstream

  specjit_launch_config c() const noexcept {
    specjit_launch_config config = {sizeof config, {grid[0], grid[1], grid[2]},
                                    {block[0], block[1], block[2]}, shared_bytes, stream};
    return config;
  }
};

namespace detail {
// The packed argument arrays of a launch, on the stack.
template <typename... Args> struct Packed {
  static constexpr size_t count = sizeof...(Args);
  std::array<void*, count == 0 ? 1 : count> pointers;
  std::array<size_t, count == 0 ? 1 : count> sizes;
  explicit Packed(const Args&... args)
      : pointers{const_cast<void*>(static_cast<const void*>(&args))...}, sizes{sizeof(Args)...} {}
};
} // namespace detail

// A variant: as long-lived as its engine.
class Variant {
public:
  explicit Variant(const specjit_variant* variant) noexcept : m_variant(variant) {}
  specjit_variant_info info() const {
    specjit_variant_info info{};
    info.struct_size = sizeof info;
    detail::check(specjit_variant_get_info(m_variant, &info));
    return info;
  }
  template <typename... Args> void launch(const LaunchConfig& config, const Args&... args) const {
    detail::Packed<Args...> packed(args...);
    specjit_launch_config c = config.c();
    detail::check(specjit_variant_launch(m_variant, &c, packed.pointers.data(),
                                         packed.sizes.data(), packed.count));
  }
  const specjit_variant* get() const noexcept { return m_variant; }

private:
  const specjit_variant* m_variant;
};

// A kernel definition registered in an engine: as long-lived as the engine.
class Kernel {
public:
  explicit Kernel(specjit_kernel* kernel) noexcept : m_kernel(kernel) {}

  Variant prepare(std::initializer_list<int64_t> values) const {
    const specjit_variant* variant = nullptr;
    detail::check(specjit_kernel_prepare(m_kernel, values.begin(), values.size(), &variant));
    return Variant(variant);
  }
  Variant get(std::initializer_list<int64_t> values) const {
    const specjit_variant* variant = nullptr;
    detail::check(specjit_kernel_get(m_kernel, values.begin(), values.size(), &variant));
    return Variant(variant);
  }
  Variant prepare(const std::vector<int64_t>& values) const {
    const specjit_variant* variant = nullptr;
    detail::check(specjit_kernel_prepare(m_kernel, values.data(), values.size(), &variant));
    return Variant(variant);
  }
  template <typename... Args>
  void launch(std::initializer_list<int64_t> values, const LaunchConfig& config,
              const Args&... args) const {
    detail::check(try_launch(values, config, args...));
  }
  template <typename... Args>
  specjit_status try_launch(std::initializer_list<int64_t> values, const LaunchConfig& config,
                            const Args&... args) const noexcept {
    detail::Packed<Args...> packed(args...);
    specjit_launch_config c = config.c();
    return specjit_kernel_launch(m_kernel, values.begin(), values.size(), &c,
                                 packed.pointers.data(), packed.sizes.data(), packed.count);
  }
  specjit_kernel* get() const noexcept { return m_kernel; }

private:
  specjit_kernel* m_kernel;
};

class Engine {
public:
  Engine() { detail::check(specjit_engine_create(nullptr, &m_engine)); }
  explicit Engine(const Settings& settings) {
    detail::check(specjit_engine_create(settings.get(), &m_engine));
  }
  ~Engine() { specjit_engine_destroy(m_engine); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&& other) noexcept : m_engine(std::exchange(other.m_engine, nullptr)) {}
  Engine& operator=(Engine&& other) noexcept {
    std::swap(m_engine, other.m_engine);
    return *this;
  }

  Kernel define(const KernelSpec& spec) {
    std::vector<specjit_param> params;
    for (const Param& param : spec.params)
      params.push_back({param.name.c_str(), param.policy.c_str()});
    std::vector<specjit_header> headers;
    for (const Header& header : spec.headers)
      headers.push_back({header.name.c_str(), header.text.c_str()});
    std::vector<const char*> include_dirs = c_strings(spec.include_dirs);
    std::vector<const char*> defines = c_strings(spec.defines);
    std::vector<const char*> options = c_strings(spec.options);
    specjit_kernel_desc desc{};
    desc.struct_size = sizeof desc;
    desc.id = spec.id.c_str();
    desc.source_kind = spec.source_kind;
    desc.source_name = spec.source_name.c_str();
    desc.source_text = spec.source_kind == SPECJIT_SOURCE_TEXT ? spec.source_text.c_str() : nullptr;
    desc.function = spec.function.c_str();
    desc.params = params.data();
    desc.param_count = params.size();
    desc.include_dirs = include_dirs.data();
    desc.include_dir_count = include_dirs.size();
    desc.headers = headers.data();
    desc.header_count = headers.size();
    desc.defines = defines.data();
    desc.define_count = defines.size();
    desc.options = options.data();
    desc.option_count = options.size();
    specjit_kernel* kernel = nullptr;
    detail::check(specjit_kernel_define(m_engine, &desc, &kernel));
    return Kernel(kernel);
  }

  void seal() { detail::check(specjit_engine_seal(m_engine)); }
  specjit_stats stats() const {
    specjit_stats stats{};
    stats.struct_size = sizeof stats;
    detail::check(specjit_engine_stats(m_engine, &stats));
    return stats;
  }
  specjit_engine* get() const noexcept { return m_engine; }

private:
  static std::vector<const char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<const char*> pointers;
    for (const std::string& s : strings)
      pointers.push_back(s.c_str());
    return pointers;
  }

  specjit_engine* m_engine = nullptr;
};

} // namespace specjit
