#include "support/hash.h"

#include <xxhash.h>

#include <fmt/format.h>

namespace specjit {

std::string Digest128::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<Digest128> Digest128::from_hex(llvm::StringRef text) {
  if (text.size() != 32)
    return std::nullopt;
  Digest128 digest;
  if (text.substr(0, 16).getAsInteger(16, digest.high) ||
      text.substr(16).getAsInteger(16, digest.low))
    return std::nullopt;
  return digest;
}

Digest128 hash128(llvm::StringRef bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.high64, h.low64};
}

uint64_t hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }

ByteHasher::ByteHasher() : m_state(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(m_state));
}

ByteHasher::~ByteHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(m_state)); }

void ByteHasher::update(llvm::StringRef bytes) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(m_state), bytes.data(), bytes.size());
}

Digest128 ByteHasher::finish() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(m_state));
  return {h.high64, h.low64};
}

FieldHasher::FieldHasher() : m_state(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(m_state));
}

FieldHasher::~FieldHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(m_state)); }

void FieldHasher::feed(const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(m_state), data, size);
}

void FieldHasher::add(llvm::StringRef tag, llvm::StringRef bytes) {
  uint64_t sizes[2] = {tag.size(), bytes.size()};
  feed(&sizes[0], sizeof(uint64_t));
  feed(tag.data(), tag.size());
  feed(&sizes[1], sizeof(uint64_t));
  feed(bytes.data(), bytes.size());
}

void FieldHasher::add(llvm::StringRef tag, int64_t value) {
  // Little-endian fixed width: the same value hashes the same on every host we support.
  char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
  add(tag, llvm::StringRef(bytes, 8));
}

void FieldHasher::add(llvm::StringRef tag, const Digest128& value) { add(tag, value.hex()); }

Digest128 FieldHasher::finish() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(m_state));
  return {h.high64, h.low64};
}

} // namespace specjit
