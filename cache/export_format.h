// The export file: cache entries moved between roots as one portable file (`specjit export`,
// `specjit import`; docs/export-format.md).
//
//   file   := magic[8] = "SPJTEXPT"  version : u32 (= 2; 1 is still read)  reserved : u32 (= 0)
//             count : u64  record{count}
//   record := kernel_size : u32  kernel[kernel_size]  entry_size : u64  entry[entry_size]
//             tag_size : u32 (0 or 32; version 2 only)  tag[tag_size]
//
// Integers are little-endian. An entry is the entry file's bytes, unchanged (entry_format.h),
// so it carries its own key and checksum: import verifies each one and publishes it under the
// key in its header, never under a name the export file chose. The tag (entry_auth.h) is
// written when a trust key is configured.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>
#include <vector>

namespace specjit::cache {

inline constexpr uint32_t k_export_version = 2;
inline constexpr size_t k_max_export_kernel_size = 4096;

struct ExportRecord {
  std::string kernel;
  llvm::StringRef entry; // views into the decoded file
  llvm::StringRef tag;   // empty when the record has none
};

// Builds an export file record by record, so that the caller holds one entry's bytes at a time.
class ExportWriter {
public:
  // `tag`: empty, or an entry_auth.h tag of k_tag_size bytes.
  void add(llvm::StringRef kernel, llvm::StringRef entry, llvm::ArrayRef<uint8_t> tag = {});
  uint64_t count() const { return m_count; }
  // The whole file: header and the records added so far.
  std::string file() const;

private:
  std::string m_records;
  uint64_t m_count = 0;
};

// Splits an export file into its records. Every length is checked against what remains, so a
// truncated or hostile file cannot make it read out of bounds or allocate without limit; the
// entries themselves are not verified here (decode_entry does that). The error names the
// problem, not the file.
llvm::Expected<std::vector<ExportRecord>> decode_export(llvm::StringRef bytes);

} // namespace specjit::cache
