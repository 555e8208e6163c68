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

// Wraps a verified entry for the remote. Where the operator's trust key computes the entry's
// tag (RELIABILITY.md, promise 7); untagged until then.
std::string remote_value_encode(llvm::StringRef entry_bytes);

// Unwraps and fully verifies a value fetched for `key`: header, sizes (nothing larger than
// max_bytes is looked at), then decode_entry under `key`. Where the operator's trust key
// checks the tag. Returns the entry's bytes (a view into `value`). Errors: EntryCorruptError.
llvm::Expected<llvm::StringRef> remote_value_decode(llvm::StringRef value, const Digest128& key,
                                                    uint64_t max_bytes);

} // namespace specjit::cache
