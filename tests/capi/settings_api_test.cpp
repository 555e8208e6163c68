// The C ABI's version, status names, last error and settings (capi/settings_api.cpp).
#include "capi_test_support.h"

#include <set>
#include <thread>

using namespace specjit::test;

TEST_CASE("the versions are the header's") {
  CHECK(specjit_abi_version() == SPECJIT_ABI_VERSION);
  CHECK(std::string(specjit_version()).find('.') != std::string::npos);
}

TEST_CASE("every status has its own name and an unknown one is named as such") {
  std::set<std::string> names;
  for (int status = SPECJIT_OK; status <= SPECJIT_ERROR_INTERNAL; ++status)
    names.insert(specjit_status_name(static_cast<specjit_status>(status)));
  CHECK(names.size() == 9);
  CHECK(std::string(specjit_status_name(SPECJIT_ERROR_CAPTURING)) == "SPECJIT_ERROR_CAPTURING");
  CHECK(std::string(specjit_status_name(static_cast<specjit_status>(99))) ==
        "SPECJIT_ERROR_UNKNOWN");
}

TEST_CASE("the last error belongs to the thread whose call failed") {
  CHECK_STATUS(specjit_settings_create(nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("specjit_settings_create: out is NULL"));
  std::string other_thread = "unset";
  std::thread([&] { other_thread = specjit_last_error(); }).join();
  CHECK(other_thread.empty());
  CHECK(last_error_has("out is NULL")); // still this thread's
  specjit_settings* settings = nullptr;
  REQUIRE_OK(specjit_settings_create(&settings));
  CHECK(std::string(specjit_last_error()).empty()); // the last call succeeded
  specjit_settings_destroy(settings);
}

TEST_CASE("a setting is checked when it is set, by name and by value") {
  specjit_settings* settings = nullptr;
  REQUIRE_OK(specjit_settings_create(&settings));
  CHECK_STATUS(specjit_settings_set(settings, "cache_dri", "/tmp/x"),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("'cache_dri' is not a setting"));
  CHECK(last_error_has("cache_dir, cache_readonly_dirs, log, strict, arch"));
  CHECK_STATUS(specjit_settings_set(settings, "CACHE_DIR", "/tmp/x"),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_settings_set(settings, "strict", "maybe"), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("SPECJIT_STRICT: 'maybe' is not a strict mode"));
  CHECK_STATUS(specjit_settings_set(settings, "lock_timeout_ms", "-5"),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_settings_set(settings, "arch", "sm_1"), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_settings_set(settings, nullptr, "x"), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("name is NULL"));
  CHECK_STATUS(specjit_settings_set(settings, "log", nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("value is NULL"));
  CHECK_STATUS(specjit_settings_set(settings, "cache_max_size", "10G"), SPECJIT_OK);
  specjit_settings_destroy(settings);
}

TEST_CASE("destroyed settings and other handles are refused as settings") {
  specjit_settings* settings = nullptr;
  REQUIRE_OK(specjit_settings_create(&settings));
  specjit_settings_destroy(settings);
  CHECK_STATUS(specjit_settings_set(settings, "log", "off"), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("a destroyed specjit_settings"));
  specjit_engine* engine = nullptr;
  CHECK_STATUS(specjit_engine_create(settings, &engine), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(engine == nullptr);
  specjit_settings_destroy(settings); // twice: ignored

  CapiEngine real;
  auto* as_settings = reinterpret_cast<specjit_settings*>(real.get());
  CHECK_STATUS(specjit_settings_set(as_settings, "log", "off"), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("settings is a specjit_engine"));
  int not_a_handle = 0;
  CHECK_STATUS(specjit_settings_set(reinterpret_cast<specjit_settings*>(&not_a_handle), "log",
                                    "off"),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("not a handle specjit created"));
}

TEST_CASE("an engine takes its settings over the environment's") {
  CapiEngine engine; // cache_dir, log and arch set through specjit_settings_set
  specjit_kernel* kernel = define_scale(engine.get());
  const int64_t values[] = {5, 32};
  const specjit_variant* variant = nullptr;
  REQUIRE_OK(specjit_kernel_prepare(kernel, values, 2, &variant));
  CHECK(!read_json_lines(engine.log()).empty()); // the log went where the settings said
}
