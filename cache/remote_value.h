// What the fleet tier keeps in Redis: names and values (docs/fleet.md).
//
//   specjit:v1:entry:<key hex>   a value (below)
//   specjit:v1:lock:<key hex>    a compile lock's token (remote_lock.h), with an expiry
//
//   value     := magic[8] = "SPJTRMTV"
//                version   : u16 (= 1)
//                flags     : u16 (bit 0: tagged; other bits must be 0)
//                tag_size  : u32 (0 when untagged; at most 64)
//                entry_size: u64 (= the bytes that follow the tag)
//                tag[tag_size]
//                entry[entry_size]   an entry file's bytes, unchanged (entry_format.h)
//
// Integers are little-endian. The tag authenticates the entry bytes under an operator's key;
// the entry inside is verified exactly as a local entry (checksum, key digest), so a value
// stored under another key's name, truncated or flipped is refused.
#pragma once

#include "cache/entry_auth.h"
#include "cache/entry_format.h"

#include <llvm/Support/Error.h>

#include <string>

namespace specjit::cache {

inline constexpr size_t k_remote_value_header_size = 24;
inline constexpr uint16_t k_remote_value_version = 1;
inline constexpr size_t k_max_remote_tag_size = 64;

std::string remote_entry_name(const Digest128& key);
std::string remote_lock_name(const Digest128& key);
// "specjit:v1:entry:*": the pattern listing every entry of this version.
std::string remote_entry_pattern();
// The key named by an entry name, or nullopt for names of other kinds or versions.
std::optional<Digest128> key_of_remote_name(llvm::StringRef name);

// The operator's trust key for the remote (RELIABILITY.md, promise 7). required: a key is
// configured, so a value without a valid tag is refused; key: the key, nullptr when it could not
// be loaded (then nothing fetched is trusted) or none is configured.
struct RemoteTrust {
  bool required = false;
  const TrustKey* key = nullptr;
};

// Wraps a verified entry stored under `key` for the remote, tagged when a trust key is given.
std::string remote_value_encode(llvm::StringRef entry_bytes, const Digest128& key,
                                const RemoteTrust& trust = {});

// Unwraps and fully verifies a value fetched for `key`: header, sizes (nothing larger than
// max_bytes is looked at), the tag when trust.required, then decode_entry under `key`. Returns
// the entry's bytes (a view into `value`). Errors: EntryCorruptError (EntryFault::untrusted for
// a missing or wrong tag).
llvm::Expected<llvm::StringRef> remote_value_decode(llvm::StringRef value, const Digest128& key,
                                                    uint64_t max_bytes,
                                                    const RemoteTrust& trust = {});

} // namespace specjit::cache
