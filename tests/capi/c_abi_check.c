/* specjit.h compiles as strict C11 and its calls behave from C (ctest capi/c_abi_check): NULL
 * handles, a too-small struct_size and a bad setting are statuses with messages. */
#include <specjit/specjit.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int condition, const char* what) {
  if (!condition) {
    fprintf(stderr, "FAILED: %s (last error: %s)\n", what, specjit_last_error());
    ++failures;
  }
}

int main(void) {
  expect(specjit_abi_version() == SPECJIT_ABI_VERSION, "abi version");
  expect(strcmp(specjit_status_name(SPECJIT_ERROR_STRICT), "SPECJIT_ERROR_STRICT") == 0,
         "status name");
  expect(specjit_engine_seal(NULL) == SPECJIT_ERROR_INVALID_ARGUMENT, "seal(NULL)");
  expect(strstr(specjit_last_error(), "engine is NULL") != NULL, "message for seal(NULL)");

  specjit_settings* settings = NULL;
  expect(specjit_settings_create(&settings) == SPECJIT_OK, "settings_create");
  expect(specjit_settings_set(settings, "no_such_setting", "1") == SPECJIT_ERROR_INVALID_ARGUMENT,
         "bad setting name");
  expect(specjit_settings_set(settings, "log", "off") == SPECJIT_OK, "log=off");
  expect(specjit_settings_set(settings, "arch", "sm_90a") == SPECJIT_OK, "arch");
  specjit_engine* engine = NULL;
  expect(specjit_engine_create(settings, &engine) == SPECJIT_OK, "engine_create");
  specjit_settings_destroy(settings);

  specjit_stats stats = {.struct_size = sizeof stats - 1};
  expect(specjit_engine_stats(engine, &stats) == SPECJIT_ERROR_INVALID_ARGUMENT,
         "struct_size too small");
  stats.struct_size = sizeof stats;
  expect(specjit_engine_stats(engine, &stats) == SPECJIT_OK && stats.requests == 0, "stats");
  expect(specjit_kernel_define(engine, NULL, NULL) == SPECJIT_ERROR_INVALID_ARGUMENT,
         "define(NULL)");
  specjit_engine_destroy(engine);
  expect(specjit_engine_seal(engine) == SPECJIT_ERROR_INVALID_ARGUMENT, "destroyed engine");
  if (failures == 0)
    printf("c_abi_check: ok\n");
  return failures == 0 ? 0 : 1;
}
