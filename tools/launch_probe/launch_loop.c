/* The launch path's own cost: N launches of one ready variant through specjit_kernel_launch and
 * specjit_variant_launch, and N direct calls of the driver's cuLaunchKernel, against the stand-in
 * driver (fake_cuda.c), so that what is timed (or counted by callgrind) is specjit's part.
 * Usage: launch_loop CACHE_DIR [N | prepare] (run by tools/launch_probe/run.sh; `prepare`
 * compiles the variant into CACHE_DIR with the real toolchain first, as NVRTC itself must not
 * meet the stand-in driver). */
#include "scale_rows_kernel.h"

#include <specjit/specjit.h>

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void must(specjit_status status, const char* what) {
  if (status != SPECJIT_OK) {
    fprintf(stderr, "launch_loop: %s: %s\n", what, specjit_last_error());
    exit(1);
  }
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Each loop is its own function, so callgrind can count them apart (--toggle-collect). */
__attribute__((noinline)) void loop_raw(CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned,
                                                           unsigned, unsigned, unsigned, unsigned,
                                                           CUstream, void**, void**),
                                        long n, int* tokens, void** args) {
  for (long i = 0; i < n; ++i) {
    *tokens = 1 + (int)(i & 255);
    launch((CUfunction)0x3000, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL);
  }
}

__attribute__((noinline)) void loop_kernel(specjit_kernel* kernel, long n, int* tokens,
                                           void** args, const size_t* sizes,
                                           const specjit_launch_config* config) {
  int64_t values[2] = {1, 128};
  for (long i = 0; i < n; ++i) {
    *tokens = 1 + (int)(i & 255);
    values[0] = *tokens;
    if (specjit_kernel_launch(kernel, values, 2, config, args, sizes, 4) != SPECJIT_OK)
      must(SPECJIT_ERROR_INTERNAL, "specjit_kernel_launch");
  }
}

__attribute__((noinline)) void loop_variant(const specjit_variant* variant, long n, int* tokens,
                                            void** args, const size_t* sizes,
                                            const specjit_launch_config* config) {
  for (long i = 0; i < n; ++i) {
    *tokens = 1 + (int)(i & 255);
    if (specjit_variant_launch(variant, config, args, sizes, 4) != SPECJIT_OK)
      must(SPECJIT_ERROR_INTERNAL, "specjit_variant_launch");
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: launch_loop CACHE_DIR [N]\n");
    return 2;
  }
  int prepare_only = argc > 2 && strcmp(argv[2], "prepare") == 0;
  long n = argc > 2 && !prepare_only ? atol(argv[2]) : 2000000;
  specjit_engine* engine = NULL;
  specjit_kernel* kernel = NULL;
  const char* step = NULL;
  specjit_status status = scale_rows_define(argv[1], &engine, &kernel, &step);
  must(status, step);
  int64_t values[2] = {1, 128};
  const specjit_variant* variant = NULL;
  if (prepare_only) {
    must(specjit_kernel_prepare(kernel, values, 2, &variant), "prepare");
    specjit_engine_destroy(engine);
    return 0;
  }
  must(specjit_kernel_get(kernel, values, 2, &variant), "get (from disk)");
  /* The driver the library loaded: the same stand-in, found the same way. */
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void* raw = cuda ? dlsym(cuda, "cuLaunchKernel") : NULL;
  if (raw == NULL) {
    fprintf(stderr, "launch_loop: no cuLaunchKernel in libcuda.so.1\n");
    return 1;
  }
  CUdeviceptr x = 0, y = 0;
  int tokens = 1;
  float alpha = 2.0f;
  void* args[] = {&x, &y, &tokens, &alpha};
  const size_t sizes[] = {sizeof x, sizeof y, sizeof tokens, sizeof alpha};
  specjit_launch_config config = {sizeof config, {1, 1, 1}, {128, 1, 1}, 0, NULL};
  double best[3] = {1e30, 1e30, 1e30};
  for (int round = 0; round < 5; ++round) {
    double t0 = now_ns();
    loop_raw((CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, CUstream, void**, void**))raw, n, &tokens, args);
    double t1 = now_ns();
    loop_kernel(kernel, n, &tokens, args, sizes, &config);
    double t2 = now_ns();
    loop_variant(variant, n, &tokens, args, sizes, &config);
    double t3 = now_ns();
    double each[3] = {(t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n};
    for (int i = 0; i < 3; ++i)
      if (each[i] < best[i])
        best[i] = each[i];
  }
  printf("%-40s %8s\n", "per launch (stand-in driver, best of 5)", "ns");
  printf("%-40s %8.1f\n", "cuLaunchKernel alone", best[0]);
  printf("%-40s %8.1f\n", "specjit_kernel_launch", best[1]);
  printf("%-40s %8.1f\n", "specjit_variant_launch", best[2]);
  printf("%-40s %8.1f\n", "added by specjit_kernel_launch", best[1] - best[0]);
  printf("%-40s %8.1f\n", "added by specjit_variant_launch", best[2] - best[0]);
  unsigned long long* launched = (unsigned long long*)dlsym(cuda, "fake_launches");
  if (launched != NULL)
    printf("%-40s %8llu\n", "driver launches (all loops)", *launched);
  specjit_engine_destroy(engine);
  return 0;
}
