// The in-memory variant key: kernel index + one specialization word per template parameter.
// A packed POD hashed with XXH3-64; no strings are built on the launch path.
#pragma once

#include "runtime/kernel_def.h"
#include "runtime/specialization.h"

#include <llvm/ADT/DenseMapInfo.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace specjit::runtime {

struct VariantKey {
  uint32_t kernel = 0;
  uint32_t count = 0;
  std::array<int64_t, k_max_params> words{}; // unused words stay zero, so the whole struct can be hashed

  // Words past `count` are always zero, so only the used ones need comparing.
  friend bool operator==(const VariantKey& a, const VariantKey& b) {
    if (a.kernel != b.kernel || a.count != b.count)
      return false;
    for (uint32_t i = 0; i < a.count; ++i)
      if (a.words[i] != b.words[i])
        return false;
    return true;
  }
};

} // namespace specjit::runtime

template <> struct llvm::DenseMapInfo<specjit::runtime::VariantKey> {
  using Key = specjit::runtime::VariantKey;
  static Key getEmptyKey() { return Key{~0u, 0, {}}; }
  static Key getTombstoneKey() { return Key{~0u - 1, 0, {}}; }
  // A multiply-xorshift mix of the words in use: inline and a few cycles, which the lookup on
  // every launch needs; the keys are small integers, well spread by the odd multiplier.
  static unsigned getHashValue(const Key& key) {
    constexpr uint64_t k_mul = 0x9e3779b97f4a7c15ull;
    uint64_t h = ((static_cast<uint64_t>(key.kernel) << 32) | key.count) * k_mul;
    for (uint32_t i = 0; i < key.count; ++i)
      h = (h ^ static_cast<uint64_t>(key.words[i])) * k_mul;
    return static_cast<unsigned>(h ^ (h >> 32));
  }
  static bool isEqual(const Key& a, const Key& b) { return a == b; }
};
