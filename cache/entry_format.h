// One cache entry is one file:
//
//   entry    := header cubin metadata
//   header   := magic[8] = "SPJTCUBN"
//               format_version : u32 (little-endian; = k_entry_format_version)
//               header_size    : u32 (= 64)
//               key            : u64 high, u64 low (the entry's own cache key)
//               cubin_size     : u64
//               metadata_size  : u64
//               checksum       : u64 high, u64 low (XXH3-128 of header bytes [0, 48), cubin,
//                                metadata)
//   cubin    := cubin_size bytes
//   metadata := metadata_size bytes of UTF-8 JSON (EntryMetadata)
//
// decode_entry verifies everything before a byte of the cubin is handed out: magic, version,
// sizes against the file size (no allocation trusts a length field), checksum, the key digest
// against the key that was asked for, and that the metadata parses and matches the key.
#pragma once

#include "cache/cache_key.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <optional>
#include <string>

namespace specjit::cache {

inline constexpr size_t k_entry_header_size = 64;
inline constexpr uint64_t k_max_entry_bytes = 1ull << 30; // anything larger is corrupt

struct EntryMetadata {
  CacheKeyInputs key_inputs;
  llvm::json::Object variant;  // the template arguments as an object, e.g. {"num_tokens": 62}
  llvm::json::Object policies; // policy per parameter, e.g. {"num_tokens": "exact"}
  std::string lowered_name;
  double compile_ms = 0;
  int registers = 0;
  int spill_bytes = 0;
  int shared_bytes = 0;
  std::vector<std::string> warnings;
  std::string created; // UTC ISO-8601, informational only (not in the key)
};

// {"key": to_json(key_inputs), "key_hex", "kernel", "variant", "policies", "lowered_name",
//  "compile_ms", "registers", "spill_bytes", "shared_bytes", "warnings": [...], "created"}.
// "key_hex" and "kernel" are written for people and tools reading the file; the reader takes
// the key from "key" (required) and treats the other fields as optional, but a field present
// with the wrong type is an error. Errors are EntryCorruptError (bad_metadata).
llvm::json::Object to_json(const EntryMetadata& metadata);
llvm::Expected<EntryMetadata> metadata_from_json(llvm::StringRef text);

enum class EntryFault {
  truncated, // shorter than the header or than the header's sizes
  bad_magic,
  unsupported_version, // a format version this build does not read
  bad_lengths,         // header size or lengths absurd or inconsistent with the file size
  checksum_mismatch,
  key_mismatch, // the header's key is not the key asked for (C2: copied under a new name)
  bad_metadata, // metadata is not valid JSON or does not match the key
  not_a_file,   // a directory, link, FIFO or device where an entry or its kernel directory is
  untrusted,    // a trust key is configured and the entry has no valid tag (entry_auth.h)
};
llvm::StringRef entry_fault_name(EntryFault fault);

class EntryCorruptError : public llvm::ErrorInfo<EntryCorruptError> {
public:
  static char ID;
  EntryCorruptError(EntryFault fault, std::string detail)
      : m_fault(fault), m_detail(std::move(detail)) {}
  EntryFault fault() const { return m_fault; }
  const std::string& detail() const { return m_detail; }
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  EntryFault m_fault;
  std::string m_detail;
};

std::string encode_entry(const Digest128& key, llvm::StringRef cubin,
                         const EntryMetadata& metadata);

struct DecodedEntry {
  Digest128 key;
  llvm::StringRef cubin; // views into the bytes passed to decode_entry
  EntryMetadata metadata;
};

// expected_key: when set, the header's key must equal it. Errors are EntryCorruptError.
llvm::Expected<DecodedEntry> decode_entry(llvm::StringRef bytes,
                                          std::optional<Digest128> expected_key);

} // namespace specjit::cache
