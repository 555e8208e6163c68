#include "cache/entry_format.h"

#include "cache_test_support.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace specjit;
using namespace specjit::cache;
using namespace specjit::cache::test;

namespace {

void put_u64(std::string& bytes, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

} // namespace

TEST_CASE("an entry round-trips through encode and decode") {
  SampleEntry entry = sample_entry();
  CHECK(entry.bytes.size() > k_entry_header_size + entry.cubin.size());
  CHECK(llvm::StringRef(entry.bytes).startswith("SPJTCUBN"));

  llvm::Expected<DecodedEntry> decoded = decode_entry(entry.bytes, entry.key);
  REQUIRE(static_cast<bool>(decoded));
  CHECK(decoded->key == entry.key);
  CHECK(decoded->cubin == entry.cubin);
  // The cubin is a view into the caller's bytes, not a copy.
  CHECK(decoded->cubin.data() == entry.bytes.data() + k_entry_header_size);
  const EntryMetadata& metadata = decoded->metadata;
  EntryMetadata expected = sample_metadata(entry.inputs);
  CHECK(metadata.key_inputs == entry.inputs);
  CHECK(metadata.lowered_name == expected.lowered_name);
  CHECK(metadata.compile_ms == expected.compile_ms);
  CHECK(metadata.registers == 40);
  CHECK(metadata.spill_bytes == 8);
  CHECK(metadata.shared_bytes == 4096);
  CHECK(metadata.warnings == expected.warnings);
  CHECK(metadata.created == expected.created);
  CHECK(metadata.variant.getInteger("num_tokens").getValueOr(0) == 64);
  CHECK(metadata.policies.getString("num_tokens").getValueOr("") == "exact");

  // Without an expected key the entry decodes too.
  llvm::Expected<DecodedEntry> any_key = decode_entry(entry.bytes, std::nullopt);
  REQUIRE(static_cast<bool>(any_key));
  CHECK(any_key->key == entry.key);
}

TEST_CASE("an empty cubin is a valid entry") {
  SampleEntry entry = sample_entry("k", 1, 0);
  llvm::Expected<DecodedEntry> decoded = decode_entry(entry.bytes, entry.key);
  REQUIRE(static_cast<bool>(decoded));
  CHECK(decoded->cubin.empty());
}

TEST_CASE("the metadata JSON carries the documented fields") {
  SampleEntry entry = sample_entry();
  llvm::json::Object json = to_json(sample_metadata(entry.inputs));
  for (const char* field :
       {"key", "key_hex", "kernel", "variant", "policies", "lowered_name", "compile_ms",
        "registers", "spill_bytes", "shared_bytes", "warnings", "created"})
    CHECK_MESSAGE(json.get(field) != nullptr, field);
  CHECK(json.getString("key_hex").getValueOr("") == entry.key.hex());
  CHECK(json.getString("kernel").getValueOr("") == "inv_rope_fp8_quant");
}

TEST_CASE("every single bit flip anywhere in an entry is detected (C1)") {
  SampleEntry entry = sample_entry("k", 3, 48);
  size_t detected = 0, trials = 0;
  for (size_t byte = 0; byte < entry.bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = entry.bytes;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      ++trials;
      if (decode_fault(flipped, entry.key))
        ++detected;
      else
        FAIL_CHECK("undetected flip of bit " << bit << " of byte " << byte);
    }
  }
  CHECK(trials == entry.bytes.size() * 8);
  CHECK(detected == trials);
}

TEST_CASE("an entry under another key's name is rejected (C2)") {
  SampleEntry entry = sample_entry("k", 1);
  SampleEntry other = sample_entry("k", 2);
  CHECK(decode_fault(entry.bytes, other.key) == EntryFault::key_mismatch);
}

TEST_CASE("truncation to every length class is detected (C3)") {
  SampleEntry entry = sample_entry("k", 5, 100);
  const size_t full = entry.bytes.size();
  const size_t cubin_end = k_entry_header_size + entry.cubin.size();
  for (size_t length : {size_t{0}, size_t{1}, size_t{8}, size_t{63}, size_t{64}, size_t{65},
                        k_entry_header_size + 50, cubin_end, cubin_end + 10, full - 1}) {
    CAPTURE(length);
    std::optional<EntryFault> fault =
        decode_fault(llvm::StringRef(entry.bytes).take_front(length), entry.key);
    CHECK(fault == EntryFault::truncated);
  }
  // Every other length as well: never accepted.
  for (size_t length = 0; length < full; ++length)
    CHECK(decode_fault(llvm::StringRef(entry.bytes).take_front(length), entry.key).has_value());
}

TEST_CASE("trailing bytes after the metadata are rejected") {
  SampleEntry entry = sample_entry();
  CHECK(decode_fault(entry.bytes + "x", entry.key) == EntryFault::bad_lengths);
}

TEST_CASE("bad magic and future format versions are rejected") {
  SampleEntry entry = sample_entry();
  std::string bad_magic = entry.bytes;
  std::memcpy(bad_magic.data(),
              "\x7f"
              "ELF\x02\x01\x01\x00",
              8);
  CHECK(decode_fault(bad_magic, entry.key) == EntryFault::bad_magic);

  std::string future = entry.bytes;
  future[8] = static_cast<char>(k_entry_format_version + 1);
  CHECK(decode_fault(future, entry.key) == EntryFault::unsupported_version);
}

TEST_CASE("absurd length fields are rejected without a huge allocation (C3)") {
  SampleEntry entry = sample_entry();
  for (uint64_t absurd :
       {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{k_max_entry_bytes} + 1, uint64_t{1} << 40}) {
    CAPTURE(absurd);
    for (size_t offset : {size_t{32}, size_t{40}}) { // cubin_size, metadata_size
      std::string bytes = entry.bytes;
      put_u64(bytes, offset, absurd);
      CHECK(decode_fault(bytes, entry.key) == EntryFault::bad_lengths);
    }
  }
  // Sizes that overflow only when added together.
  std::string bytes = entry.bytes;
  put_u64(bytes, 32, k_max_entry_bytes);
  put_u64(bytes, 40, k_max_entry_bytes);
  CHECK(decode_fault(bytes, entry.key).has_value());
  // A header size other than 64.
  bytes = entry.bytes;
  bytes[12] = 65;
  CHECK(decode_fault(bytes, entry.key) == EntryFault::bad_lengths);
}

TEST_CASE("metadata that does not parse or does not match the key is rejected") {
  SampleEntry entry = sample_entry();
  // A correctly checksummed entry whose metadata describes another key: a broken writer.
  EntryMetadata lying = sample_metadata(entry.inputs);
  lying.key_inputs.nvrtc_version = "99.9";
  std::string bytes = encode_entry(entry.key, entry.cubin, lying);
  CHECK(decode_fault(bytes, entry.key) == EntryFault::bad_metadata);
  CHECK(decode_fault(bytes, std::nullopt) == EntryFault::bad_metadata);

  llvm::Expected<EntryMetadata> not_json = metadata_from_json("{not json");
  REQUIRE(!not_json);
  llvm::consumeError(not_json.takeError());
  llvm::Expected<EntryMetadata> no_key = metadata_from_json(R"({"kernel": "k"})");
  REQUIRE(!no_key);
  llvm::consumeError(no_key.takeError());
  llvm::Expected<EntryMetadata> wrong_type = metadata_from_json(R"({"key": 1})");
  REQUIRE(!wrong_type);
  llvm::consumeError(wrong_type.takeError());
}

TEST_CASE("entry_fault_name names every fault") {
  CHECK(entry_fault_name(EntryFault::truncated) == "truncated");
  CHECK(entry_fault_name(EntryFault::key_mismatch) == "key_mismatch");
  CHECK(entry_fault_name(EntryFault::checksum_mismatch) == "checksum_mismatch");
}
