// TMA tensor maps (CUtensorMap) for kernels that load tiles with cp.async.bulk.tensor.
// Encoding is a host-only driver call (no device work, well under a microsecond), done per
// launch so a map always matches the pointer it is launched with; the map travels to the
// kernel by value as a __grid_constant__ parameter (kernels_src/common/wgmma.cuh: TmaDesc).
#pragma once

#include "runtime/driver.h"

#include <llvm/Support/Error.h>

#include <array>
#include <cstdint>

namespace specjit::runtime {

// A rank-3 map over bytes of a dense tensor [dims[2]][dims[1]][dims[0]] at `base` (dims
// innermost first), loaded in boxes of box[0] x box[1] x box[2] bytes with the 128-byte
// swizzle (box[0] <= 128). Checks what the driver would reject, with a message naming it:
// 16-byte aligned base, dims[0] a multiple of 16, box sizes in [1, 256].
llvm::Expected<CUtensorMap> tensor_map_u8_3d(CUdeviceptr base, std::array<uint64_t, 3> dims,
                                             std::array<uint32_t, 3> box);

// A rank-4 map over a packed MoE weight tensor (ops::moe_pack_weights: `rows` rows of k_bytes in
// pieces of piece_rows rows x 128 bytes, piece (row / piece_rows, k / 128) at piece bytes x
// (row / piece_rows * k_bytes / 128 + k / 128)): dims {128, piece_rows, k_bytes / 128,
// rows / piece_rows}, boxes of box_rows / piece_rows pieces of one k, no swizzle (the pieces hold
// their bytes in the 128-byte swizzle's order already, so they land as the row-major map's
// swizzled boxes do). Checks as above, and whole pieces.
llvm::Expected<CUtensorMap> tensor_map_packed_weights(CUdeviceptr base, uint64_t rows,
                                                      uint64_t k_bytes, uint32_t piece_rows,
                                                      uint32_t box_rows);

} // namespace specjit::runtime
