// A CUtensorMap as kernels see it: 128 opaque bytes, 64-byte aligned, passed inside a
// __grid_constant__ kernel argument so that TMA reads it from parameter space. Plain C++ with no
// CUDA header: the host compiler reads it too (kernels_src/moe/gemm_args.h, which includes it by
// a relative name). A guard macro rather than #pragma once: NVRTC receives the file under both
// of its spellings, as two headers.
#ifndef SPECJIT_KERNELS_COMMON_TMA_DESC_H
#define SPECJIT_KERNELS_COMMON_TMA_DESC_H

namespace specjit_kernels {

struct alignas(64) TmaDesc {
  unsigned long long words[16];
};

} // namespace specjit_kernels

#endif
