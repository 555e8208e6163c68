// The specialization policy: per kernel value, what is compiled in and what stays a run-time
// argument (../shared/DESIGN.md, "Specialization policy").
//
// A kernel's template parameter governed by a policy receives either the raw value (for
// `exact` and `bucketed` values the kernel needs as constants: group counts, tile sizes) or a
// *spec word* that kernels_src/common/spec.cuh decodes:
//
//   spec word = kind * 10^12 + argument
//     dynamic          0                        the kernel uses the run-time value
//     exact            1e12 + value             the kernel uses the constant
//     bucketed         2e12 + bucket            the kernel uses the run-time value; bucket = a
//                                               compile-time upper bound (tile choice)
//     divisible        3e12 + n                 run-time value, known to be a multiple of n
//     not divisible    4e12                     run-time value, nothing known
//     one              5e12 + 1                 the value is 1 (Triton's value-1 variant)
//
// Decimal, so name expressions and lowered names stay readable. Bumping the encoding bumps
// k_policy_version, which is hashed into every disk key.
#pragma once

#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <cstdint>
#include <string>
#include <vector>

namespace specjit::runtime {

inline constexpr uint32_t k_policy_version = 1;
inline constexpr int64_t k_spec_base = 1'000'000'000'000;
// The bucket of values above a list's last bound when the policy declares an overflow bucket
// ("bucketed(16,64,+inf)"), and of powers of two past 2^39: the largest value a policy takes,
// so the kernel's upper_bound stays true. Shown as "<=inf".
inline constexpr int64_t k_unbounded_bucket = k_spec_base - 1;

enum class PolicyKind : uint8_t { dynamic, exact, bucketed, divisibility };

struct Policy {
  PolicyKind kind = PolicyKind::dynamic;
  std::vector<int64_t> buckets; // bucketed: ascending upper bounds; empty means powers of two
  int64_t divisor = 0;          // divisibility
  bool special_one = false;     // divisibility: a separate variant for the value 1
  // bucketed with a list: values above the last bound share one overflow bucket whose bound
  // is k_unbounded_bucket. Without it such a value is an error, never a silent clamp.
  bool overflow = false;

  friend bool operator==(const Policy&, const Policy&) = default;

  static Policy dynamic() { return {}; }
  static Policy exact() { return {PolicyKind::exact, {}, 0, false, false}; }
  static Policy bucketed_pow2() { return {PolicyKind::bucketed, {}, 0, false, false}; }
  static Policy bucketed(std::vector<int64_t> bounds, bool overflow = false) {
    return {PolicyKind::bucketed, std::move(bounds), 0, false, overflow};
  }
  static Policy divisibility(int64_t n, bool special_one = false) {
    return {PolicyKind::divisibility, {}, n, special_one, false};
  }
  // Triton's default integer specialization: divisible by 16, and the value 1.
  static Policy triton() { return divisibility(16, true); }

  // "dynamic", "exact", "bucketed(pow2)", "bucketed(16,64,256)", "bucketed(16,64,256,+inf)",
  // "divisibility(16)", "divisibility(16)+one".
  std::string name() const;
  static llvm::Expected<Policy> parse(llvm::StringRef text); // inverse of name(); "triton" too
  llvm::Error validate() const;
};

enum class SpecKind : uint8_t { dynamic, exact, bucketed, divisible, not_divisible, one };

struct SpecValue {
  SpecKind kind = SpecKind::dynamic;
  int64_t argument = 0;

  friend bool operator==(const SpecValue&, const SpecValue&) = default;
  int64_t word() const { return static_cast<int64_t>(kind) * k_spec_base + argument; }
  // The value as the template argument when the parameter is raw-encoded (exact, bucketed).
  int64_t raw() const { return argument; }
  // How the variant object shows it: 62 (exact), "dynamic", "<=64" (bucket), "%16", "any", "1".
  std::string describe() const;
  // Inverse of describe() given the JSON value (a number or one of the strings above).
  static llvm::Expected<SpecValue> parse(const llvm::json::Value& described);
  // Inverse of word().
  static llvm::Expected<SpecValue> from_word(int64_t word);
};

// Maps a call's value to its specialization. Values must be >= 0 and < 10^12; with a bucket
// list and no overflow bucket, at most the last bound (the error names value and bound; the
// callers add the kernel and parameter).
llvm::Expected<SpecValue> specialize(const Policy& policy, int64_t value);

} // namespace specjit::runtime
