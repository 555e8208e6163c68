#include "cache/export_format.h"

#include "cache/entry_auth.h"
#include "cache/entry_format.h"

#include "support/error.h"

#include <llvm/Support/Endian.h>

#include <cassert>

namespace specjit::cache {
namespace {

constexpr llvm::StringLiteral k_magic = "SPJTEXPT";
constexpr size_t k_header_size = 24;

void put_u32(std::string& out, uint32_t value) {
  char bytes[4];
  llvm::support::endian::write32le(bytes, value);
  out.append(bytes, 4);
}

void put_u64(std::string& out, uint64_t value) {
  char bytes[8];
  llvm::support::endian::write64le(bytes, value);
  out.append(bytes, 8);
}

} // namespace

void ExportWriter::add(llvm::StringRef kernel, llvm::StringRef entry, llvm::ArrayRef<uint8_t> tag) {
  assert(kernel.size() <= k_max_export_kernel_size && (tag.empty() || tag.size() == k_tag_size));
  put_u32(m_records, static_cast<uint32_t>(kernel.size()));
  m_records += kernel;
  put_u64(m_records, entry.size());
  m_records += entry;
  put_u32(m_records, static_cast<uint32_t>(tag.size()));
  m_records.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  ++m_count;
}

std::string ExportWriter::file() const {
  std::string bytes(k_magic.data(), k_magic.size());
  put_u32(bytes, k_export_version);
  put_u32(bytes, 0);
  put_u64(bytes, m_count);
  return bytes + m_records;
}

llvm::Expected<std::vector<ExportRecord>> decode_export(llvm::StringRef bytes) {
  using llvm::support::endian::read32le;
  using llvm::support::endian::read64le;
  if (bytes.size() < k_header_size || !bytes.startswith(k_magic))
    return make_error(Errc::corrupt, "not a specjit export file (bad magic)");
  const uint32_t version = read32le(bytes.data() + 8);
  if (version != 1 && version != k_export_version)
    return make_error(Errc::unsupported,
                      "export format version {} is not supported (this build reads {})", version,
                      k_export_version);
  const uint64_t count = read64le(bytes.data() + 16);
  llvm::StringRef rest = bytes.drop_front(k_header_size);
  // The shortest record: a kernel size and an entry size (and a tag size from version 2).
  if (count > rest.size() / 12)
    return make_error(Errc::corrupt, "claims {} entries, more than its size allows", count);
  std::vector<ExportRecord> records;
  for (uint64_t i = 0; i < count; ++i) {
    if (rest.size() < 4)
      return make_error(Errc::corrupt, "truncated in record {}", i);
    const uint32_t kernel_size = read32le(rest.data());
    rest = rest.drop_front(4);
    if (kernel_size > k_max_export_kernel_size || rest.size() < kernel_size + 8ull)
      return make_error(Errc::corrupt, "truncated or bad kernel name in record {}", i);
    std::string kernel = rest.take_front(kernel_size).str();
    rest = rest.drop_front(kernel_size);
    const uint64_t entry_size = read64le(rest.data());
    rest = rest.drop_front(8);
    if (entry_size > rest.size() || entry_size > k_max_entry_bytes)
      return make_error(Errc::corrupt, "truncated or bad entry length in record {}", i);
    llvm::StringRef entry = rest.take_front(entry_size);
    rest = rest.drop_front(entry_size);
    llvm::StringRef tag;
    if (version >= 2) {
      const uint32_t tag_size = rest.size() < 4 ? UINT32_MAX : read32le(rest.data());
      if (tag_size != 0 && tag_size != k_tag_size)
        return make_error(Errc::corrupt, "truncated or bad tag length in record {}", i);
      if (rest.size() < 4ull + tag_size)
        return make_error(Errc::corrupt, "truncated tag in record {}", i);
      tag = rest.substr(4, tag_size);
      rest = rest.drop_front(4 + tag_size);
    }
    records.push_back({std::move(kernel), entry, tag});
  }
  if (!rest.empty())
    return make_error(Errc::corrupt, "{} trailing bytes after the last record", rest.size());
  return records;
}

} // namespace specjit::cache
