// specjit.h: version, status names, the last error, and settings.
#include "capi/handles.h"
#include "capi/status.h"

#include "support/config.h"
#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#ifndef SPECJIT_VERSION_STRING
#error "the build defines SPECJIT_VERSION_STRING (capi/CMakeLists.txt)"
#endif

using namespace specjit;
using namespace specjit::capi;

namespace {

// "cache_dir" -> "SPECJIT_CACHE_DIR", when it names a variable Config reads.
std::optional<std::string> variable_for(llvm::StringRef name) {
  for (const Config::Row& row : Config().describe()) {
    llvm::StringRef variable = row.variable;
    if (variable.consume_front("SPECJIT_") && variable.equals_insensitive(name) &&
        name == name.lower())
      return row.variable;
  }
  return std::nullopt;
}

std::string known_names() {
  std::string names;
  for (const Config::Row& row : Config().describe())
    names += (names.empty() ? "" : ", ") + llvm::StringRef(row.variable).drop_front(8).lower();
  return names;
}

} // namespace

extern "C" {

uint32_t specjit_abi_version(void) { return SPECJIT_ABI_VERSION; }

const char* specjit_version(void) { return SPECJIT_VERSION_STRING; }

const char* specjit_status_name(specjit_status status) {
  switch (status) {
  case SPECJIT_OK: return "SPECJIT_OK";
  case SPECJIT_ERROR_INVALID_ARGUMENT: return "SPECJIT_ERROR_INVALID_ARGUMENT";
  case SPECJIT_ERROR_NOT_FOUND: return "SPECJIT_ERROR_NOT_FOUND";
  case SPECJIT_ERROR_COMPILE: return "SPECJIT_ERROR_COMPILE";
  case SPECJIT_ERROR_STRICT: return "SPECJIT_ERROR_STRICT";
  case SPECJIT_ERROR_DRIVER: return "SPECJIT_ERROR_DRIVER";
  case SPECJIT_ERROR_CAPTURING: return "SPECJIT_ERROR_CAPTURING";
  case SPECJIT_ERROR_CACHE: return "SPECJIT_ERROR_CACHE";
  case SPECJIT_ERROR_INTERNAL: return "SPECJIT_ERROR_INTERNAL";
  }
  return "SPECJIT_ERROR_UNKNOWN";
}

const char* specjit_last_error(void) { return last_error(); }

specjit_status specjit_settings_create(specjit_settings** out) {
  if (out == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT, "specjit_settings_create: out is NULL");
  *out = new_settings(); // never freed: see capi/handles.h
  return finish(llvm::Error::success());
}

specjit_status specjit_settings_set(specjit_settings* settings, const char* name,
                                    const char* value) {
  constexpr const char* function = "specjit_settings_set";
  if (auto err = check_settings(settings, function))
    return finish(std::move(err));
  if (name == nullptr || value == nullptr)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: {} is NULL", function, name == nullptr ? "name" : "value"));
  std::optional<std::string> variable = variable_for(name);
  if (!variable)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: '{}' is not a setting; the settings are {}", function, name,
                            known_names()));
  // The value is checked now, by the parser the environment's variable goes through.
  auto parsed = Config::from_lookup([&](llvm::StringRef asked) -> std::optional<std::string> {
    if (asked == *variable)
      return std::string(value);
    return std::nullopt;
  });
  if (!parsed)
    return fail(SPECJIT_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: {} ({})", function, llvm::toString(parsed.takeError()), name));
  settings->values[*variable] = value;
  return finish(llvm::Error::success());
}

void specjit_settings_destroy(specjit_settings* settings) {
  if (settings == nullptr)
    return;
  // A destroy function returns nothing: a bad handle leaves only the thread's message.
  if (auto err = check_settings(settings, "specjit_settings_destroy")) {
    finish(std::move(err));
    return;
  }
  settings->tag.store(static_cast<uint32_t>(HandleTag::destroyed_settings));
  settings->values.clear();
}

} // extern "C"
