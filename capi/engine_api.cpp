// specjit.h: engines (create, destroy, seal, stats).
#include "capi/handles.h"
#include "capi/status.h"

#include "support/config.h"
#include "support/error.h"

#include <cstddef>

using namespace specjit;
using namespace specjit::capi;

extern "C" {

specjit_status specjit_engine_create(const specjit_settings* settings, specjit_engine** out) {
  constexpr const char* function = "specjit_engine_create";
  if (out == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT, "specjit_engine_create: out is NULL");
  *out = nullptr;
  if (settings != nullptr)
    if (auto err = check_settings(settings, function))
      return finish(std::move(err));
  auto config = Config::from_environment([&](llvm::StringRef name) -> std::optional<std::string> {
    if (settings == nullptr)
      return std::nullopt;
    auto it = settings->values.find(name.str());
    if (it == settings->values.end())
      return std::nullopt;
    return it->second;
  });
  if (!config)
    return finish(make_error(Errc::invalid_argument, "{}: {}", function,
                             llvm::toString(config.takeError())));
  try {
    *out = new_engine(std::make_unique<runtime::Engine>(*config));
  } catch (const std::exception& e) {
    // Nothing may cross the C boundary; allocation failure is the only throw possible here.
    return fail(SPECJIT_ERROR_INTERNAL, fmt::format("{}: {}", function, e.what()));
  }
  return finish(llvm::Error::success());
}

void specjit_engine_destroy(specjit_engine* engine) {
  if (engine == nullptr)
    return;
  if (auto err = check_engine(engine, "specjit_engine_destroy")) {
    finish(std::move(err)); // a destroy returns nothing: the thread's message says why
    return;
  }
  destroy_engine(engine);
}

specjit_status specjit_engine_seal(specjit_engine* engine) {
  if (auto err = check_engine(engine, "specjit_engine_seal"))
    return finish(std::move(err));
  engine->engine->seal();
  return finish(llvm::Error::success());
}

specjit_status specjit_engine_stats(const specjit_engine* engine, specjit_stats* out) {
  constexpr const char* function = "specjit_engine_stats";
  if (auto err = check_engine(engine, function))
    return finish(std::move(err));
  if (auto err = check_struct(out, out ? out->struct_size : 0, sizeof(specjit_stats), function,
                              "out"))
    return finish(std::move(err));
  runtime::EngineStats stats = engine->engine->stats();
  out->requests = stats.requests;
  out->memory_hits = stats.memory_hits;
  out->disk_hits = stats.disk_hits;
  out->compiles = stats.compiles;
  out->failures = stats.failures;
  out->corrupt_entries = stats.corrupt_entries;
  out->write_failures = stats.write_failures;
  out->storms = stats.storms;
  return finish(llvm::Error::success());
}

} // extern "C"
