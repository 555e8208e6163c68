// Decoding of specialization words (runtime/specialization.h): a kernel's template parameter
// SPEC says what is known at compile time about a run-time value.
#pragma once

namespace specjit_kernels {

inline constexpr long long k_spec_base = 1000000000000LL;

enum SpecKind : int { spec_dynamic = 0, spec_exact = 1, spec_bucketed = 2, spec_divisible = 3,
                      spec_not_divisible = 4, spec_one = 5 };

template <long long SPEC> struct Spec {
  static constexpr int kind = static_cast<int>(SPEC / k_spec_base);
  static constexpr long long argument = SPEC % k_spec_base;
  // Largest value the kernel can see, when known at compile time (exact, bucketed, one).
  static constexpr long long upper_bound =
      kind == spec_exact || kind == spec_bucketed || kind == spec_one ? argument : -1;

  // The value the kernel should compute with: the constant when the value is baked in,
  // otherwise the run-time value (with what is known about it told to the compiler).
  __device__ __forceinline__ static long long value(long long runtime_value) {
    if constexpr (kind == spec_exact || kind == spec_one) {
      return argument;
    } else if constexpr (kind == spec_divisible) {
      __builtin_assume(runtime_value % argument == 0);
      return runtime_value;
    } else {
      return runtime_value;
    }
  }
};

} // namespace specjit_kernels
