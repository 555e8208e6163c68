// The in-memory variant key: kernel index + one specialization word per template parameter.
// A packed POD hashed with XXH3-64; no strings are built on the launch path.
#pragma once

#include "runtime/specialization.h"

#include "support/hash.h"

#include <llvm/ADT/DenseMapInfo.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace specjit::runtime {

struct VariantKey {
  uint32_t kernel = 0;
  uint32_t count = 0;
  std::array<int64_t, 8> words{}; // unused words stay zero, so the whole struct can be hashed

  friend bool operator==(const VariantKey&, const VariantKey&) = default;
};

} // namespace specjit::runtime

template <> struct llvm::DenseMapInfo<specjit::runtime::VariantKey> {
  using Key = specjit::runtime::VariantKey;
  static Key getEmptyKey() { return Key{~0u, 0, {}}; }
  static Key getTombstoneKey() { return Key{~0u - 1, 0, {}}; }
  static unsigned getHashValue(const Key& key) {
    // Only the words in use: unused ones are zero and add nothing.
    return static_cast<unsigned>(
        specjit::hash64(&key, offsetof(Key, words) + key.count * sizeof(int64_t)));
  }
  static bool isEqual(const Key& a, const Key& b) { return a == b; }
};
