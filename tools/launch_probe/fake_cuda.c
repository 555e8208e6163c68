/* A stand-in libcuda.so.1 for measuring specjit's own launch path on a machine without a GPU:
 * every driver function returns at once, so a launch through specjit costs exactly what
 * specjit adds. Only the calls the probe's path makes return real-looking outputs. Never
 * installed; used by tools/launch_probe/run.sh through LD_LIBRARY_PATH. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

static CUcontext k_context = (CUcontext)0x1000;
CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult r, const char** s) { (void)r; *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult r, const char** s) { (void)r; *s = "fake driver"; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* d, int i) { *d = i; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  (void)d; strncpy(name, "Fake H200", (size_t)len); return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
  default: *v = 1 << 16; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { (void)d; *c = k_context; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext* c) { *c = k_context; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice* d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* m, const void* image) { (void)image; *m = (CUmodule)0x2000; return CUDA_SUCCESS; }
CUresult cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  (void)m; (void)name; *f = (CUfunction)0x3000; return CUDA_SUCCESS;
}
/* The probe kernel's parameters: FAKE_PARAM_SIZES="8,8,4,4" (the default). */
CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  (void)f;
  const char* list = getenv("FAKE_PARAM_SIZES");
  if (list == NULL) list = "8,8,4,4";
  size_t at = 0, i = 0;
  for (const char* p = list; *p; ++i) {
    size_t s = strtoul(p, (char**)&p, 10);
    if (i == index) { *offset = at; *size = s; return CUDA_SUCCESS; }
    at += s;
    if (*p == ',') ++p;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f; (void)a; (void)v; return CUDA_SUCCESS; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction f, int b, size_t s) {
  (void)f; (void)b; (void)s; *n = 1; return CUDA_SUCCESS;
}
unsigned long long fake_launches = 0;
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream s, void** args,
                        void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)s;
  (void)args; (void)extra;
  ++fake_launches;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** args, void** extra) {
  (void)c; (void)f; (void)args; (void)extra; ++fake_launches; return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* p, size_t n) { *p = (CUdeviceptr)malloc(n ? n : 1); return CUDA_SUCCESS; }
CUresult cuMemFree(CUdeviceptr p) { free((void*)p); return CUDA_SUCCESS; }
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* st) {
  (void)s; *st = CU_STREAM_CAPTURE_STATUS_NONE; return CUDA_SUCCESS;
}
