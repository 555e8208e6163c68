// Test-only header for relative_include.cu.
#pragma once

namespace specjit_kernels {
inline constexpr int k_relative_helper_value = 3;
} // namespace specjit_kernels
