// specjit-bench digest's pieces (digest_bench.cpp: the flags and the run; digest_moe.cpp: the
// fused MoE cases): device buffers, and a case run twice and digested.
#pragma once

#include "bench_common.h"
#include "moe_models.h"

#include "runtime/engine.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace specjit::bench {

// Device memory freed with the object.
struct DeviceBuffer {
  const runtime::Driver& drv;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const runtime::Driver& d, size_t size) : drv(d), bytes(std::max<size_t>(size, 256)) {
    must(drv.check(drv.cuMemAlloc(&ptr, bytes), "cuMemAlloc"), "alloc");
    must(drv.check(drv.cuMemsetD8(ptr, 0, bytes), "cuMemsetD8"), "alloc");
  }
  ~DeviceBuffer() { drv.cuMemFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* host, size_t size) const {
    must(drv.check(drv.cuMemcpyHtoD(ptr, host, size), "cuMemcpyHtoD"), "upload");
  }
};

// The XXH3-128 of `bytes` bytes at `ptr` (the stream synchronized first).
std::string device_digest(const runtime::Driver& drv, CUdeviceptr ptr, size_t bytes);

// One output tensor of a case: where it lies and its size.
struct Output {
  const char* name;
  CUdeviceptr ptr;
  size_t bytes;
};

// Counts what went wrong; main returns non-zero when anything did.
struct Tally {
  int lines = 0, failures = 0;
};

// Runs `run` twice, the outputs filled with 0x00 and then 0xA5 before each run, and prints one
// line per output: its digest, or "unstable" when the two runs differ.
void run_case(const runtime::Driver& drv, const std::string& prefix,
              const std::vector<Output>& outputs, const std::function<llvm::Error()>& run,
              Tally& tally);

// The fused MoE cases' names, in their order.
std::vector<std::string> moe_case_names();

// Every case of one model and dtype at these token counts (`case_names`: only those; empty: all).
void digest_moe(runtime::Engine& engine, const runtime::Driver& drv, const Model& model,
                ops::MoeDType dtype, const std::vector<int64_t>& token_counts,
                const std::vector<std::string>& case_names, CUstream stream, Tally& tally);

} // namespace specjit::bench
