/* The tiny kernel that the C ABI's launch measurements launch (launch_loop, specjit-bench capi):
 * examples/c's scale_rows, and an engine on one cache directory, its log off, that defines it with
 * num_tokens dynamic and COLS exact. C and C++ both read this header. */
#pragma once

#include <specjit/specjit.h>

#include <stddef.h>
#include <string.h>

static const char* const k_scale_rows_source =
    "template <int COLS>\n"
    "__global__ void scale_rows(const float* x, float* y, int num_tokens, float alpha) {\n"
    "  long long total = (long long)num_tokens * COLS;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    y[i] = x[i] * alpha + (float)(i / COLS);\n"
    "}\n";

/* Creates *engine on cache_dir and defines scale_rows in *kernel. On failure returns the status
 * and sets *step to the step that failed ("settings", "cache_dir", "log", "engine", "define"),
 * the words the callers print before they exit. */
static inline specjit_status scale_rows_define(const char* cache_dir, specjit_engine** engine,
                                               specjit_kernel** kernel, const char** step) {
  specjit_settings* settings = NULL;
  specjit_status status;
  *step = "settings";
  if ((status = specjit_settings_create(&settings)) != SPECJIT_OK)
    return status;
  *step = "cache_dir";
  if ((status = specjit_settings_set(settings, "cache_dir", cache_dir)) == SPECJIT_OK) {
    *step = "log";
    status = specjit_settings_set(settings, "log", "off");
  }
  if (status == SPECJIT_OK) {
    *step = "engine";
    status = specjit_engine_create(settings, engine);
  }
  specjit_settings_destroy(settings);
  if (status != SPECJIT_OK)
    return status;
  specjit_param params[] = {{"num_tokens", "dynamic"}, {"COLS", "exact"}};
  specjit_kernel_desc desc;
  memset(&desc, 0, sizeof desc); /* C and C++ alike, and no missing-initializer warning */
  desc.struct_size = sizeof desc;
  desc.id = "scale_rows";
  desc.source_kind = SPECJIT_SOURCE_TEXT;
  desc.source_name = "scale_rows.cu";
  desc.source_text = k_scale_rows_source;
  desc.function = "scale_rows";
  desc.params = params;
  desc.param_count = 2;
  *step = "define";
  return specjit_kernel_define(*engine, &desc, kernel);
}
