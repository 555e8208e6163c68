#include "cache/entry_format.h"

#include "support/error.h"

// The state lives on the stack: no allocation per checksum.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

namespace specjit::cache {

char EntryCorruptError::ID = 0;

namespace {

constexpr char k_magic[8] = {'S', 'P', 'J', 'T', 'C', 'U', 'B', 'N'};
// Byte offsets of the header fields (entry_format.h).
constexpr size_t k_off_version = 8;
constexpr size_t k_off_header_size = 12;
constexpr size_t k_off_key = 16;
constexpr size_t k_off_cubin_size = 32;
constexpr size_t k_off_metadata_size = 40;
constexpr size_t k_checksummed_header = 48;
constexpr size_t k_off_checksum = 48;

// Explicit little-endian byte order: entries built on one host are read on any other.
void put_u64(char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
void put_u32(char* out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
uint64_t get_u64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}
uint32_t get_u32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

Digest128 entry_checksum(llvm::StringRef header, llvm::StringRef cubin, llvm::StringRef metadata) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, header.data(), k_checksummed_header);
  XXH3_128bits_update(&state, cubin.data(), cubin.size());
  XXH3_128bits_update(&state, metadata.data(), metadata.size());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return {h.high64, h.low64};
}

llvm::Error corrupt(EntryFault fault, std::string detail) {
  return llvm::make_error<EntryCorruptError>(fault, std::move(detail));
}

llvm::json::Array to_json_array(const std::vector<std::string>& strings) {
  llvm::json::Array array;
  for (const std::string& s : strings)
    array.push_back(s);
  return array;
}

} // namespace

llvm::StringRef entry_fault_name(EntryFault fault) {
  switch (fault) {
  case EntryFault::truncated:
    return "truncated";
  case EntryFault::bad_magic:
    return "bad_magic";
  case EntryFault::unsupported_version:
    return "unsupported_version";
  case EntryFault::bad_lengths:
    return "bad_lengths";
  case EntryFault::checksum_mismatch:
    return "checksum_mismatch";
  case EntryFault::key_mismatch:
    return "key_mismatch";
  case EntryFault::bad_metadata:
    return "bad_metadata";
  case EntryFault::not_a_file:
    return "not_a_file";
  case EntryFault::untrusted:
    return "untrusted";
  }
  return "unknown";
}

void EntryCorruptError::log(llvm::raw_ostream& os) const {
  os << "corrupt cache entry (" << entry_fault_name(m_fault) << "): " << m_detail;
}

std::error_code EntryCorruptError::convertToErrorCode() const {
  return specjit::make_error_code(Errc::corrupt);
}

llvm::json::Object to_json(const EntryMetadata& metadata) {
  Digest128 key = cache_key(metadata.key_inputs);
  return llvm::json::Object{
      {"key", to_json(metadata.key_inputs)},
      {"key_hex", key.hex()},
      {"kernel", metadata.key_inputs.kernel},
      {"variant", llvm::json::Object(metadata.variant)},
      {"policies", llvm::json::Object(metadata.policies)},
      {"lowered_name", metadata.lowered_name},
      {"compile_ms", metadata.compile_ms},
      {"registers", metadata.registers},
      {"spill_bytes", metadata.spill_bytes},
      {"shared_bytes", metadata.shared_bytes},
      {"warnings", to_json_array(metadata.warnings)},
      {"created", metadata.created},
  };
}

namespace {

// Optional informational fields: absent is fine (a later format may drop them), a wrong type is
// not (it means the writer and this reader disagree about the format).
llvm::Error read_info_fields(const llvm::json::Object& object, EntryMetadata& metadata) {
  auto bad = [](llvm::StringRef name) {
    return corrupt(EntryFault::bad_metadata, "metadata field '" + name.str() + "' is malformed");
  };
  if (const llvm::json::Value* value = object.get("variant")) {
    if (!value->getAsObject())
      return bad("variant");
    metadata.variant = *value->getAsObject();
  }
  if (const llvm::json::Value* value = object.get("policies")) {
    if (!value->getAsObject())
      return bad("policies");
    metadata.policies = *value->getAsObject();
  }
  if (const llvm::json::Value* value = object.get("lowered_name")) {
    if (!value->getAsString())
      return bad("lowered_name");
    metadata.lowered_name = value->getAsString()->str();
  }
  if (const llvm::json::Value* value = object.get("created")) {
    if (!value->getAsString())
      return bad("created");
    metadata.created = value->getAsString()->str();
  }
  if (const llvm::json::Value* value = object.get("compile_ms")) {
    if (!value->getAsNumber())
      return bad("compile_ms");
    metadata.compile_ms = *value->getAsNumber();
  }
  struct IntField {
    const char* name;
    int* target;
  };
  for (IntField field :
       {IntField{"registers", &metadata.registers}, IntField{"spill_bytes", &metadata.spill_bytes},
        IntField{"shared_bytes", &metadata.shared_bytes}}) {
    const llvm::json::Value* value = object.get(field.name);
    if (!value)
      continue;
    auto number = value->getAsInteger();
    if (!number || *number < INT32_MIN || *number > INT32_MAX)
      return bad(field.name);
    *field.target = static_cast<int>(*number);
  }
  if (const llvm::json::Value* value = object.get("warnings")) {
    const llvm::json::Array* array = value->getAsArray();
    if (!array)
      return bad("warnings");
    for (const llvm::json::Value& warning : *array) {
      if (!warning.getAsString())
        return bad("warnings");
      metadata.warnings.push_back(warning.getAsString()->str());
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<EntryMetadata> metadata_from_json(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return corrupt(EntryFault::bad_metadata,
                   "metadata is not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object* object = parsed->getAsObject();
  if (!object)
    return corrupt(EntryFault::bad_metadata, "metadata is not a JSON object");
  const llvm::json::Object* key = object->getObject("key");
  if (!key)
    return corrupt(EntryFault::bad_metadata, "metadata has no 'key' object");
  EntryMetadata metadata;
  llvm::Expected<CacheKeyInputs> inputs = key_inputs_from_json(*key);
  if (!inputs)
    return corrupt(EntryFault::bad_metadata, llvm::toString(inputs.takeError()));
  metadata.key_inputs = std::move(*inputs);
  if (llvm::Error error = read_info_fields(*object, metadata))
    return error;
  return metadata;
}

std::string encode_entry(const Digest128& key, llvm::StringRef cubin,
                         const EntryMetadata& metadata) {
  std::string json;
  llvm::raw_string_ostream(json) << llvm::json::Value(to_json(metadata));

  std::string bytes(k_entry_header_size, '\0');
  bytes.reserve(k_entry_header_size + cubin.size() + json.size());
  std::memcpy(bytes.data(), k_magic, sizeof k_magic);
  put_u32(&bytes[k_off_version], k_entry_format_version);
  put_u32(&bytes[k_off_header_size], static_cast<uint32_t>(k_entry_header_size));
  put_u64(&bytes[k_off_key], key.high);
  put_u64(&bytes[k_off_key + 8], key.low);
  put_u64(&bytes[k_off_cubin_size], cubin.size());
  put_u64(&bytes[k_off_metadata_size], json.size());
  Digest128 checksum = entry_checksum(bytes, cubin, json);
  put_u64(&bytes[k_off_checksum], checksum.high);
  put_u64(&bytes[k_off_checksum + 8], checksum.low);
  bytes.append(cubin.data(), cubin.size());
  bytes += json;
  return bytes;
}

namespace {

struct HeaderFields {
  Digest128 key;
  uint64_t cubin_size = 0;
  uint64_t metadata_size = 0;
};

// Checks everything the header says against the buffer before any length is used.
llvm::Expected<HeaderFields> check_header(llvm::StringRef bytes) {
  if (bytes.size() > k_max_entry_bytes)
    return corrupt(EntryFault::bad_lengths,
                   "entry of " + std::to_string(bytes.size()) + " bytes exceeds the size limit");
  if (bytes.size() < k_entry_header_size)
    return corrupt(EntryFault::truncated, "entry of " + std::to_string(bytes.size()) +
                                              " bytes is shorter than its header");
  if (std::memcmp(bytes.data(), k_magic, sizeof k_magic) != 0)
    return corrupt(EntryFault::bad_magic, "not a specjit cache entry (bad magic)");
  uint32_t version = get_u32(bytes.data() + k_off_version);
  if (version != k_entry_format_version)
    return corrupt(EntryFault::unsupported_version,
                   "entry format version " + std::to_string(version) + " (this build reads " +
                       std::to_string(k_entry_format_version) + ")");
  if (get_u32(bytes.data() + k_off_header_size) != k_entry_header_size)
    return corrupt(EntryFault::bad_lengths, "header size field is not 64");
  HeaderFields fields;
  fields.key = {get_u64(bytes.data() + k_off_key), get_u64(bytes.data() + k_off_key + 8)};
  fields.cubin_size = get_u64(bytes.data() + k_off_cubin_size);
  fields.metadata_size = get_u64(bytes.data() + k_off_metadata_size);
  // Each size is bounded first, so the sum below cannot overflow.
  if (fields.cubin_size > k_max_entry_bytes || fields.metadata_size > k_max_entry_bytes)
    return corrupt(EntryFault::bad_lengths, "absurd cubin or metadata size in the header");
  uint64_t expected = k_entry_header_size + fields.cubin_size + fields.metadata_size;
  if (expected > bytes.size())
    return corrupt(EntryFault::truncated, "header announces " + std::to_string(expected) +
                                              " bytes, the entry has " +
                                              std::to_string(bytes.size()));
  if (expected < bytes.size())
    return corrupt(EntryFault::bad_lengths, "entry has " + std::to_string(bytes.size() - expected) +
                                                " bytes after its metadata");
  return fields;
}

} // namespace

llvm::Expected<DecodedEntry> decode_entry(llvm::StringRef bytes,
                                          std::optional<Digest128> expected_key) {
  llvm::Expected<HeaderFields> header = check_header(bytes);
  if (!header)
    return header.takeError();
  llvm::StringRef cubin = bytes.substr(k_entry_header_size, header->cubin_size);
  llvm::StringRef json = bytes.substr(k_entry_header_size + header->cubin_size);

  Digest128 stored{get_u64(bytes.data() + k_off_checksum),
                   get_u64(bytes.data() + k_off_checksum + 8)};
  if (entry_checksum(bytes, cubin, json) != stored)
    return corrupt(EntryFault::checksum_mismatch, "checksum mismatch");
  if (expected_key && *expected_key != header->key)
    return corrupt(EntryFault::key_mismatch,
                   "entry holds key " + header->key.hex() + ", expected " + expected_key->hex());

  llvm::Expected<EntryMetadata> metadata = metadata_from_json(json);
  if (!metadata)
    return metadata.takeError();
  // The metadata describes the key it was compiled for; an entry whose description hashes to
  // another key was written by a broken writer and must not be trusted.
  Digest128 described = cache_key(metadata->key_inputs);
  if (described != header->key)
    return corrupt(EntryFault::bad_metadata, "metadata describes key " + described.hex() +
                                                 ", header holds " + header->key.hex());
  return DecodedEntry{header->key, cubin, std::move(*metadata)};
}

} // namespace specjit::cache
