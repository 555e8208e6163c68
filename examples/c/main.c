/* Bring your own kernel, from C: a kernel defined from a string, `num_tokens` dynamic (one
 * variant serves every token count) and COLS exact (compiled in). Prepares 1,000 token counts
 * (no GPU needed) and prints the engine's counters: the first run compiles once, a second run
 * finds the variant on disk and compiles nothing.
 *
 *   cmake -S examples/c -B build-c -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-c
 *   cc examples/c/main.c $(pkg-config --cflags --libs specjit) -o scale   (pkg-config)
 */
#include <specjit/specjit.h>

#include <stdio.h>

static const char* const k_source =
    "template <int COLS>\n"
    "__global__ void scale_rows(const float* x, float* y, int num_tokens, float alpha) {\n"
    "  long long total = (long long)num_tokens * COLS;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    y[i] = x[i] * alpha + (float)(i / COLS);\n"
    "}\n";

static int failed(const char* what, specjit_status status) {
  fprintf(stderr, "%s: %s: %s\n", what, specjit_status_name(status), specjit_last_error());
  return 1;
}

int main(void) {
  specjit_engine* engine = NULL;
  specjit_status status = specjit_engine_create(NULL, &engine); /* SPECJIT_* environment */
  if (status != SPECJIT_OK)
    return failed("specjit_engine_create", status);

  specjit_param params[] = {{"num_tokens", "dynamic"}, {"COLS", "exact"}};
  specjit_kernel_desc desc = {.struct_size = sizeof desc};
  desc.id = "scale_rows";
  desc.source_kind = SPECJIT_SOURCE_TEXT;
  desc.source_name = "scale_rows.cu";
  desc.source_text = k_source;
  desc.function = "scale_rows";
  desc.params = params;
  desc.param_count = 2;
  specjit_kernel* kernel = NULL;
  status = specjit_kernel_define(engine, &desc, &kernel);
  if (status != SPECJIT_OK)
    return failed("specjit_kernel_define", status);

  const specjit_variant* variant = NULL;
  for (int64_t tokens = 1; tokens <= 1000; ++tokens) {
    int64_t values[] = {tokens, 256};
    status = specjit_kernel_prepare(kernel, values, 2, &variant);
    if (status != SPECJIT_OK)
      return failed("specjit_kernel_prepare", status);
  }
  specjit_variant_info info = {.struct_size = sizeof info};
  status = specjit_variant_get_info(variant, &info);
  if (status != SPECJIT_OK)
    return failed("specjit_variant_get_info", status);
  specjit_stats stats = {.struct_size = sizeof stats};
  status = specjit_engine_stats(engine, &stats);
  if (status != SPECJIT_OK)
    return failed("specjit_engine_stats", status);
  printf("variant %s (%d registers)\n", info.name_expression, info.registers);
  printf("requests=%llu memory_hits=%llu disk_hits=%llu compiles=%llu failures=%llu\n",
         (unsigned long long)stats.requests, (unsigned long long)stats.memory_hits,
         (unsigned long long)stats.disk_hits, (unsigned long long)stats.compiles,
         (unsigned long long)stats.failures);
  specjit_engine_destroy(engine);
  return 0;
}
