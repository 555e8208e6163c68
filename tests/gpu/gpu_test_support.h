// Pieces every GPU test uses: the driver table (failing the test when it cannot load), and
// device memory freed on scope exit, with whole-buffer or ranged copies and poisoning.
#pragma once

#include "runtime/driver.h"

#include <doctest/doctest.h>

#include <cstdint>

namespace specjit::test {

inline constexpr uint8_t k_poison = 0xCD; // written over outputs before every run

inline void require_ok(llvm::Error error) {
  if (error)
    FAIL(llvm::toString(std::move(error)));
}

inline const runtime::Driver& drv() {
  auto table = runtime::driver();
  if (!table)
    FAIL(llvm::toString(table.takeError()));
  return *table;
}

class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : m_bytes(bytes) {
    if (bytes != 0)
      require_ok(drv().check(drv().cuMemAlloc(&m_ptr, bytes), "cuMemAlloc"));
  }
  ~DeviceBuffer() {
    if (m_ptr != 0)
      drv().cuMemFree(m_ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return m_ptr; }
  size_t bytes() const { return m_bytes; }
  // The whole buffer by default; `bytes` from `offset` otherwise.
  void upload(const void* host) { upload(host, m_bytes); }
  void upload(const void* host, size_t bytes) {
    if (bytes != 0)
      require_ok(drv().check(drv().cuMemcpyHtoD(m_ptr, host, bytes), "cuMemcpyHtoD"));
  }
  void download(void* host) const { download(host, m_bytes); }
  void download(void* host, size_t bytes, size_t offset = 0) const {
    if (bytes != 0)
      require_ok(drv().check(drv().cuMemcpyDtoH(host, m_ptr + offset, bytes), "cuMemcpyDtoH"));
  }
  void poison() {
    if (m_bytes != 0)
      require_ok(drv().check(drv().cuMemsetD8(m_ptr, k_poison, m_bytes), "cuMemsetD8"));
  }

private:
  CUdeviceptr m_ptr = 0;
  size_t m_bytes = 0;
};

} // namespace specjit::test
