// Hashing: XXH3-128 digests for disk keys and checksums, XXH3-64 for in-memory keys.
// Keys are built from tagged fields, never from concatenated strings: each field is fed as
// (tag, length, bytes), so ("ab","c") and ("a","bc") can never collide by construction.
#pragma once

#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <optional>
#include <string>

namespace specjit {

struct Digest128 {
  uint64_t high = 0;
  uint64_t low = 0;

  friend bool operator==(const Digest128&, const Digest128&) = default;
  // 32 lower-case hex digits, high word first.
  std::string hex() const;
  static std::optional<Digest128> from_hex(llvm::StringRef text);
};

Digest128 hash128(llvm::StringRef bytes);
uint64_t hash64(const void* data, size_t size);

// Streaming XXH3-128 over plain bytes: the same digest as hash128 of their concatenation, for
// contents read in pieces (a large header through a small buffer).
class ByteHasher {
public:
  ByteHasher();
  ~ByteHasher();
  ByteHasher(const ByteHasher&) = delete;
  ByteHasher& operator=(const ByteHasher&) = delete;

  void update(llvm::StringRef bytes);
  Digest128 finish() const;

private:
  void* m_state; // XXH3_state_t
};

// Streaming XXH3-128 over tagged fields.
class FieldHasher {
public:
  FieldHasher();
  ~FieldHasher();
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;

  void add(llvm::StringRef tag, llvm::StringRef bytes);
  void add(llvm::StringRef tag, int64_t value);
  void add(llvm::StringRef tag, const Digest128& value);
  Digest128 finish() const;

private:
  void feed(const void* data, size_t size);
  void* m_state; // XXH3_state_t, kept opaque so xxhash.h stays out of every includer
};

} // namespace specjit
