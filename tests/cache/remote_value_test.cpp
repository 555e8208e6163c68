#include "cache/remote_value.h"

#include "cache_test_support.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::cache;

namespace {

std::optional<EntryFault> fault_of(llvm::StringRef value, const Digest128& key,
                                   uint64_t max_bytes = 1 << 20) {
  auto decoded = remote_value_decode(value, key, max_bytes);
  if (decoded)
    return std::nullopt;
  std::optional<EntryFault> fault;
  llvm::handleAllErrors(decoded.takeError(),
                        [&](const EntryCorruptError& error) { fault = error.fault(); });
  return fault;
}

} // namespace

TEST_CASE("remote names are namespaced, versioned and give their key back") {
  test::SampleEntry entry = test::sample_entry();
  CHECK(remote_entry_name(entry.key) == "specjit:v1:entry:" + entry.key.hex());
  CHECK(remote_lock_name(entry.key) == "specjit:v1:lock:" + entry.key.hex());
  CHECK(key_of_remote_name(remote_entry_name(entry.key)) == entry.key);
  CHECK(!key_of_remote_name(remote_lock_name(entry.key)));
  CHECK(!key_of_remote_name("specjit:v2:entry:" + entry.key.hex()));
}

TEST_CASE("an encoded value decodes to the entry's bytes under its key") {
  test::SampleEntry entry = test::sample_entry();
  std::string value = remote_value_encode(entry.bytes, entry.key);
  CHECK(value.size() == k_remote_value_header_size + entry.bytes.size());
  auto decoded = remote_value_decode(value, entry.key, 1 << 20);
  REQUIRE(decoded);
  CHECK(*decoded == entry.bytes);
}

TEST_CASE("a value under another key's name is refused") {
  test::SampleEntry entry = test::sample_entry("a", 1), other = test::sample_entry("b", 2);
  CHECK(fault_of(remote_value_encode(entry.bytes, entry.key), other.key) == EntryFault::key_mismatch);
}

TEST_CASE("every truncation and every bit flip of a value is detected") {
  test::SampleEntry entry = test::sample_entry("k", 3, 64);
  std::string value = remote_value_encode(entry.bytes, entry.key);
  for (size_t size = 0; size < value.size(); ++size)
    CHECK_MESSAGE(fault_of(llvm::StringRef(value).take_front(size), entry.key), size);
  for (size_t byte = 0; byte < value.size(); ++byte) {
    std::string flipped = value;
    flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << (byte % 8)));
    CHECK_MESSAGE(fault_of(flipped, entry.key), byte);
  }
}

TEST_CASE("an oversized value, a future version and a tag without its flag are refused") {
  test::SampleEntry entry = test::sample_entry();
  std::string value = remote_value_encode(entry.bytes, entry.key);
  CHECK(fault_of(value, entry.key, value.size() - 1) == EntryFault::bad_lengths);
  std::string future = value;
  future[8] = 2;
  CHECK(fault_of(future, entry.key) == EntryFault::unsupported_version);
  std::string untagged_tag = value;
  untagged_tag[12] = 16;
  CHECK(fault_of(untagged_tag, entry.key) == EntryFault::bad_lengths);
  CHECK(fault_of(value + "x", entry.key) == EntryFault::bad_lengths);
  CHECK(fault_of("SPJTCUBN" + value.substr(8), entry.key) == EntryFault::bad_magic);
}

TEST_CASE("with a trust key, only values tagged under that key are accepted") {
  test::SampleEntry entry = test::sample_entry("t", 4);
  llvm::Expected<TrustKey> key = TrustKey::from_file_bytes(std::string(32, 'a'));
  llvm::Expected<TrustKey> other = TrustKey::from_file_bytes(std::string(32, 'b'));
  REQUIRE(key);
  REQUIRE(other);
  RemoteTrust trusted{true, &*key};
  std::string tagged = remote_value_encode(entry.bytes, entry.key, trusted);
  CHECK(tagged.size() == k_remote_value_header_size + k_tag_size + entry.bytes.size());
  auto decoded = remote_value_decode(tagged, entry.key, 1 << 20, trusted);
  REQUIRE(decoded);
  CHECK(*decoded == entry.bytes);
  // A tagged value still verifies where no key is configured.
  CHECK(remote_value_decode(tagged, entry.key, 1 << 20));

  auto fault_with = [&](llvm::StringRef value, RemoteTrust trust) {
    auto result = remote_value_decode(value, entry.key, 1 << 20, trust);
    std::optional<EntryFault> fault;
    if (!result)
      llvm::handleAllErrors(result.takeError(),
                            [&](const EntryCorruptError& error) { fault = error.fault(); });
    return fault;
  };
  CHECK(fault_with(remote_value_encode(entry.bytes, entry.key), trusted) == EntryFault::untrusted);
  CHECK(fault_with(remote_value_encode(entry.bytes, entry.key, {true, &*other}), trusted) ==
        EntryFault::untrusted);
  CHECK(fault_with(tagged, RemoteTrust{true, nullptr}) == EntryFault::untrusted);
}
