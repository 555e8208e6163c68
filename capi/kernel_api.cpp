// specjit.h: kernels and variants (define, prepare, get, info, launch).
#include "capi/capture_guard.h"
#include "capi/handles.h"
#include "capi/kernel_desc.h"
#include "capi/status.h"

#include "support/error.h"

using namespace specjit;
using namespace specjit::capi;

namespace {

llvm::Error check_values(const specjit_kernel* kernel, const int64_t* values, size_t count,
                         const char* function) {
  if (count != kernel->param_names.size())
    return make_error(Errc::invalid_argument, "{}: kernel {} takes {} values, got {}", function,
                      kernel->name, kernel->param_names.size(), count);
  if (count > 0 && values == nullptr)
    return make_error(Errc::invalid_argument, "{}: values is NULL", function);
  return llvm::Error::success();
}

llvm::Error check_arguments(void* const* args, const size_t* sizes, size_t count,
                            const char* function) {
  if (count == 0)
    return llvm::Error::success();
  if (args == nullptr || sizes == nullptr)
    return make_error(Errc::invalid_argument, "{}: {} is NULL but arg_count is {}", function,
                      args == nullptr ? "args" : "sizes", count);
  for (size_t i = 0; i < count; ++i)
    if (args[i] == nullptr)
      return make_error(Errc::invalid_argument, "{}: args[{}] is NULL", function, i);
  return llvm::Error::success();
}

// The launch's configuration and packed arguments, checked: the messages, when a check fails.
llvm::Error launch_config_error(const specjit_launch_config* config, void* const* args,
                                const size_t* sizes, size_t arg_count, const char* function) {
  if (auto err = check_arguments(args, sizes, arg_count, function))
    return err;
  if (auto err = check_struct(config, config ? config->struct_size : 0,
                              sizeof(specjit_launch_config), function, "config"))
    return err;
  for (int i = 0; i < 3; ++i)
    if (config->grid[i] == 0 || config->block[i] == 0)
      return make_error(Errc::invalid_argument, "{}: config->{}[{}] is 0", function,
                        config->grid[i] == 0 ? "grid" : "block", i);
  return make_error(Errc::invalid_argument, "{}: the launch configuration was refused", function);
}

// The launch path's form: true and `out` filled when every check passes (no error built).
inline bool launch_config(const specjit_launch_config* config, void* const* args,
                          const size_t* sizes, size_t arg_count, runtime::LaunchConfig& out) {
  if (config == nullptr || config->struct_size < sizeof(specjit_launch_config))
    return false;
  if (arg_count > 0 && (args == nullptr || sizes == nullptr))
    return false;
  bool ok = true;
  for (size_t i = 0; i < arg_count; ++i)
    ok &= args[i] != nullptr;
  for (int i = 0; i < 3; ++i) {
    ok &= config->grid[i] != 0 && config->block[i] != 0;
    out.grid[i] = config->grid[i];
    out.block[i] = config->block[i];
  }
  out.shared_bytes = config->shared_bytes;
  out.stream = static_cast<CUstream>(config->stream);
  return ok;
}

using Resolve = llvm::Expected<const runtime::Variant*> (runtime::Engine::*)(
    runtime::KernelId, llvm::ArrayRef<int64_t>);

// prepare and get: the checks, the engine's call, the variant's handle.
specjit_status find_variant(specjit_kernel* kernel, const int64_t* values, size_t count,
                            const specjit_variant** out, Resolve resolve, bool guard,
                            const char* function) {
  if (auto err = check_kernel(kernel, function))
    return finish(std::move(err));
  if (out == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT, fmt::format("{}: out is NULL", function));
  *out = nullptr;
  if (auto err = check_values(kernel, values, count, function))
    return finish(std::move(err));
  llvm::ArrayRef<int64_t> list(values, count);
  if (guard && kernel->engine->find_loaded(kernel->id, list) == nullptr)
    if (auto err = refuse_while_capturing(*kernel, list, nullptr, function))
      return finish(std::move(err));
  auto variant = (kernel->engine->*resolve)(kernel->id, list);
  if (!variant)
    return finish(variant.takeError());
  *out = variant_handle(*kernel, **variant);
  return finish(llvm::Error::success());
}

} // namespace

extern "C" {

specjit_status specjit_kernel_define(specjit_engine* engine, const specjit_kernel_desc* desc,
                                     specjit_kernel** out) {
  constexpr const char* function = "specjit_kernel_define";
  if (auto err = check_engine(engine, function))
    return finish(std::move(err));
  if (out == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT, "specjit_kernel_define: out is NULL");
  *out = nullptr;
  if (auto err = check_struct(desc, desc ? desc->struct_size : 0, sizeof(specjit_kernel_desc),
                              function, "desc"))
    return finish(std::move(err));
  auto def = kernel_def_from_desc(*desc);
  if (!def)
    return finish(def.takeError());
  auto id = engine->engine->add_kernel(*def);
  if (!id)
    return finish(id.takeError());
  *out = kernel_handle(*engine, *id);
  return finish(llvm::Error::success());
}

specjit_status specjit_kernel_prepare(specjit_kernel* kernel, const int64_t* values,
                                      size_t value_count, const specjit_variant** out) {
  return find_variant(kernel, values, value_count, out, &runtime::Engine::prepare,
                      /*guard=*/false, "specjit_kernel_prepare");
}

specjit_status specjit_kernel_get(specjit_kernel* kernel, const int64_t* values, size_t value_count,
                                  const specjit_variant** out) {
  return find_variant(kernel, values, value_count, out, &runtime::Engine::get, /*guard=*/true,
                      "specjit_kernel_get");
}

specjit_status specjit_variant_get_info(const specjit_variant* variant, specjit_variant_info* out) {
  constexpr const char* function = "specjit_variant_get_info";
  if (auto err = check_variant(variant, function))
    return finish(std::move(err));
  if (auto err = check_struct(out, out ? out->struct_size : 0, sizeof(specjit_variant_info),
                              function, "out"))
    return finish(std::move(err));
  const runtime::Variant& v = *variant->variant;
  out->kernel = variant->kernel->name.c_str();
  out->name_expression = v.name_expression.c_str();
  out->key = variant->key_hex.c_str();
  out->variant_json = variant->variant_json.c_str();
  out->source = static_cast<int>(v.source);
  out->registers = v.registers;
  out->spill_bytes = v.spill_bytes;
  out->shared_bytes = v.shared_bytes;
  out->compile_ms = v.compile_ms;
  return finish(llvm::Error::success());
}

specjit_status specjit_variant_launch(const specjit_variant* variant,
                                      const specjit_launch_config* config, void* const* args,
                                      const size_t* sizes, size_t arg_count) {
  constexpr const char* function = "specjit_variant_launch";
  if (auto err = check_variant(variant, function))
    return finish(std::move(err));
  runtime::LaunchConfig launch;
  if (!launch_config(config, args, sizes, arg_count, launch)) [[unlikely]]
    return finish(launch_config_error(config, args, sizes, arg_count, function));
  runtime::Engine& engine = *variant->kernel->engine;
  // A variant from prepare() has no module yet: launch_packed says so.
  if (variant->variant->function != nullptr)
    if (auto err = engine.make_context_current())
      return finish(std::move(err));
  return finish(engine.launch_packed(*variant->variant, launch,
                                     const_cast<const void* const*>(args), sizes, arg_count));
}

specjit_status specjit_kernel_launch(specjit_kernel* kernel, const int64_t* values,
                                     size_t value_count, const specjit_launch_config* config,
                                     void* const* args, const size_t* sizes, size_t arg_count) {
  constexpr const char* function = "specjit_kernel_launch";
  if (auto err = check_kernel(kernel, function))
    return finish(std::move(err));
  runtime::LaunchConfig launch;
  if (!launch_config(config, args, sizes, arg_count, launch)) [[unlikely]]
    return finish(launch_config_error(config, args, sizes, arg_count, function));
  if (auto err = check_values(kernel, values, value_count, function))
    return finish(std::move(err));
  runtime::Engine& engine = *kernel->engine;
  llvm::ArrayRef<int64_t> list(values, value_count);
  // The hot path: a ready, loaded variant; no driver call before the launch itself.
  const runtime::Variant* variant = engine.find_loaded(kernel->id, list);
  if (variant == nullptr) {
    if (auto err = refuse_while_capturing(*kernel, list, launch.stream, function))
      return finish(std::move(err));
    auto found = engine.get(kernel->id, list);
    if (!found)
      return finish(found.takeError());
    variant = *found;
  }
  return finish(engine.launch_packed(*variant, launch, const_cast<const void* const*>(args), sizes,
                                     arg_count));
}

} // extern "C"
