#include "cache/remote_value.h"

#include <llvm/Support/Endian.h>

#include <fmt/format.h>

namespace specjit::cache {

namespace {

constexpr llvm::StringLiteral k_magic = "SPJTRMTV";
constexpr llvm::StringLiteral k_entry_prefix = "specjit:v1:entry:";
constexpr llvm::StringLiteral k_lock_prefix = "specjit:v1:lock:";
constexpr uint16_t k_flag_tagged = 1;
// Byte offsets of the header fields (remote_value.h).
constexpr size_t k_off_version = 8;
constexpr size_t k_off_flags = 10;
constexpr size_t k_off_tag_size = 12;
constexpr size_t k_off_entry_size = 16;

llvm::Error corrupt(EntryFault fault, std::string detail) {
  return llvm::make_error<EntryCorruptError>(fault, "remote value: " + detail);
}

// The one place a value's tag is checked: with no trust key configured there is nothing to
// check a tag against, so a tagged value is accepted on its entry's own verification.
llvm::Error check_tag(llvm::StringRef tag, llvm::StringRef entry, const Digest128& key,
                      const RemoteTrust& trust) {
  if (!trust.required)
    return llvm::Error::success();
  if (trust.key == nullptr)
    return corrupt(EntryFault::untrusted, "untrusted: the trust key could not be loaded");
  if (tag.empty())
    return corrupt(EntryFault::untrusted, "untrusted: the value carries no tag");
  llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t*>(tag.data()), tag.size());
  if (!verify_tag(*trust.key, key, entry, bytes))
    return corrupt(EntryFault::untrusted, "untrusted: the tag does not match the trust key");
  return llvm::Error::success();
}

} // namespace

std::string remote_entry_name(const Digest128& key) { return k_entry_prefix.str() + key.hex(); }
std::string remote_lock_name(const Digest128& key) { return k_lock_prefix.str() + key.hex(); }
std::string remote_entry_pattern() { return k_entry_prefix.str() + "*"; }

std::optional<Digest128> key_of_remote_name(llvm::StringRef name) {
  if (!name.consume_front(k_entry_prefix))
    return std::nullopt;
  return Digest128::from_hex(name);
}

std::string remote_value_encode(llvm::StringRef entry_bytes, const Digest128& key,
                                const RemoteTrust& trust) {
  using namespace llvm::support::endian;
  std::string tag;
  if (trust.key != nullptr) {
    Tag computed = compute_tag(*trust.key, key, entry_bytes);
    tag.assign(reinterpret_cast<const char*>(computed.data()), computed.size());
  }
  std::string value(k_remote_value_header_size, '\0');
  std::copy(k_magic.begin(), k_magic.end(), value.begin());
  write16le(&value[k_off_version], k_remote_value_version);
  write16le(&value[k_off_flags], tag.empty() ? 0 : k_flag_tagged);
  write32le(&value[k_off_tag_size], static_cast<uint32_t>(tag.size()));
  write64le(&value[k_off_entry_size], entry_bytes.size());
  value += tag;
  value += entry_bytes;
  return value;
}

llvm::Expected<llvm::StringRef> remote_value_decode(llvm::StringRef value, const Digest128& key,
                                                    uint64_t max_bytes,
                                                    const RemoteTrust& trust) {
  using namespace llvm::support::endian;
  if (value.size() > max_bytes)
    return corrupt(EntryFault::bad_lengths,
                   fmt::format("{} bytes, more than the limit of {}", value.size(), max_bytes));
  if (value.size() < k_remote_value_header_size)
    return corrupt(EntryFault::truncated, fmt::format("{} bytes, shorter than its header",
                                                      value.size()));
  if (!value.startswith(k_magic))
    return corrupt(EntryFault::bad_magic, "not a specjit remote value");
  uint16_t version = read16le(value.data() + k_off_version);
  if (version != k_remote_value_version)
    return corrupt(EntryFault::unsupported_version, fmt::format("version {}", version));
  uint16_t flags = read16le(value.data() + k_off_flags);
  uint32_t tag_size = read32le(value.data() + k_off_tag_size);
  uint64_t entry_size = read64le(value.data() + k_off_entry_size);
  if ((flags & ~k_flag_tagged) != 0 || tag_size > k_max_remote_tag_size ||
      ((flags & k_flag_tagged) != 0) != (tag_size != 0))
    return corrupt(EntryFault::bad_lengths,
                   fmt::format("flags {:#x} and tag size {} do not agree", flags, tag_size));
  uint64_t rest = value.size() - k_remote_value_header_size;
  if (tag_size > rest || entry_size != rest - tag_size)
    return corrupt(rest < tag_size + entry_size ? EntryFault::truncated : EntryFault::bad_lengths,
                   fmt::format("{} bytes after the header, {} announced", rest,
                               uint64_t{tag_size} + entry_size));
  llvm::StringRef tag = value.substr(k_remote_value_header_size, tag_size);
  llvm::StringRef entry = value.substr(k_remote_value_header_size + tag_size);
  if (auto err = check_tag(tag, entry, key, trust))
    return err;
  auto decoded = decode_entry(entry, key);
  if (!decoded)
    return decoded.takeError();
  return entry;
}

} // namespace specjit::cache
