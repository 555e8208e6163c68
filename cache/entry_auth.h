// Entry authentication across trust boundaries (docs/reliability.md, "Threat model"). The
// checksum in an entry's header catches accidents; anyone can recompute it. A tag is a keyed
// MAC (HMAC-SHA-512-256, libsodium's crypto_auth) from an operator's key over
//   "specjit-entry-tag-v1" || key digest (high, low: u64 little-endian) || the entry's bytes
// so only a holder of the key can make an entry that an importer, a read-only layer reader or
// the remote tier accepts. Tags travel in export bundles (docs/export-format.md) and as
// sidecar files next to entries of a layer built with a key (disk_store.h draws the tree).
#pragma once

#include "cache/cache_key.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/Error.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace specjit::cache {

inline constexpr size_t k_tag_size = 32;
using Tag = std::array<uint8_t, k_tag_size>;

// The MAC key, derived from the key file's bytes with BLAKE2b-256 (so any file of at least 32
// bytes works: raw random bytes or hex text). Never printed, never in a message.
class TrustKey {
public:
  static constexpr size_t k_min_file_bytes = 32;
  static constexpr size_t k_max_file_bytes = 4096;
  // From the key file's contents; shorter than k_min_file_bytes is an error.
  static llvm::Expected<TrustKey> from_file_bytes(llvm::StringRef bytes);
  const std::array<uint8_t, 32>& bytes() const { return m_bytes; }

private:
  std::array<uint8_t, 32> m_bytes{};
};

// Reads the key file: a regular file (no link), owned by this user, neither group- nor
// world-readable, 32 to 4096 bytes. Errors name the path and the problem, never the key.
llvm::Expected<TrustKey> load_trust_key(const std::string& path);

Tag compute_tag(const TrustKey& key, const Digest128& digest, llvm::StringRef entry_bytes);
// Constant-time comparison; a tag of the wrong size never verifies.
bool verify_tag(const TrustKey& key, const Digest128& digest, llvm::StringRef entry_bytes,
                llvm::ArrayRef<uint8_t> tag);

// The sidecar file of an entry in a layer: magic "SPJTTAG1" then the 32 tag bytes.
inline constexpr llvm::StringLiteral k_tag_magic = "SPJTTAG1";
inline constexpr size_t k_tag_file_size = 8 + k_tag_size;
std::string encode_tag_file(const Tag& tag);
// The tag of a sidecar file's bytes; nullopt when they are not one.
std::optional<Tag> decode_tag_file(llvm::StringRef bytes);

} // namespace specjit::cache
