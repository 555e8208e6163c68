// Entry tags: a keyed MAC over the key digest and the entry's bytes, and the key file's rules.
#include "cache/entry_auth.h"

#include "cache_test_support.h"
#include "test_support.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace specjit;
using namespace specjit::cache;
using specjit::test::TempDir;
using specjit::test::write_file;

namespace {

TrustKey key_of(const std::string& text) {
  llvm::Expected<TrustKey> key = TrustKey::from_file_bytes(text);
  REQUIRE_MESSAGE(static_cast<bool>(key), llvm::toString(key.takeError()));
  return *key;
}

llvm::ArrayRef<uint8_t> view(const Tag& tag) { return {tag.data(), tag.size()}; }

const std::string k_key_a(32, 'a');
const std::string k_key_b(32, 'b');

} // namespace

TEST_CASE("a tag verifies only with the same key, digest and bytes") {
  TrustKey a = key_of(k_key_a), b = key_of(k_key_b);
  Digest128 digest{1, 2}, other_digest{1, 3};
  std::string bytes = "the entry's bytes";
  Tag tag = compute_tag(a, digest, bytes);
  CHECK(verify_tag(a, digest, bytes, view(tag)));
  CHECK(!verify_tag(b, digest, bytes, view(tag)));
  CHECK(!verify_tag(a, other_digest, bytes, view(tag)));
  std::string changed = bytes;
  changed[3] ^= 1;
  CHECK(!verify_tag(a, digest, changed, view(tag)));
  CHECK(!verify_tag(a, digest, bytes, view(tag).drop_back()));
  CHECK(compute_tag(a, digest, bytes) == tag); // deterministic: export and layers agree
}

TEST_CASE("a key file shorter than 32 bytes is refused") {
  llvm::Expected<TrustKey> key = TrustKey::from_file_bytes("short");
  REQUIRE(!key);
  CHECK(summarize(key.takeError()).message.find("at least 32") != std::string::npos);
}

TEST_CASE("the key file must be a private regular file of this user") {
  TempDir dir;
  std::string path = dir / "key";
  write_file(path, k_key_a);
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  llvm::Expected<TrustKey> loaded = load_trust_key(path);
  REQUIRE_MESSAGE(static_cast<bool>(loaded), llvm::toString(loaded.takeError()));
  CHECK(loaded->bytes() == key_of(k_key_a).bytes());

  REQUIRE(chmod(path.c_str(), 0640) == 0);
  llvm::Expected<TrustKey> readable = load_trust_key(path);
  REQUIRE(!readable);
  std::string message = summarize(readable.takeError()).message;
  CHECK(message.find("group or others") != std::string::npos);
  CHECK(message.find(k_key_a) == std::string::npos); // never the key itself

  REQUIRE(chmod(path.c_str(), 0600) == 0);
  REQUIRE(symlink(path.c_str(), (dir / "link").c_str()) == 0);
  llvm::Expected<TrustKey> linked = load_trust_key(dir / "link");
  REQUIRE(!linked);
  CHECK(summarize(linked.takeError()).message.find("symbolic links") != std::string::npos);

  REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
  llvm::Expected<TrustKey> fifo = load_trust_key(dir / "fifo");
  REQUIRE(!fifo);
  CHECK(summarize(fifo.takeError()).message.find("not a regular file") != std::string::npos);
}

TEST_CASE("tag files round-trip and anything else is not one") {
  Tag tag = compute_tag(key_of(k_key_a), Digest128{5, 6}, "x");
  std::string file = encode_tag_file(tag);
  CHECK(file.size() == k_tag_file_size);
  std::optional<Tag> back = decode_tag_file(file);
  REQUIRE(back);
  CHECK(*back == tag);
  CHECK(!decode_tag_file(file.substr(1)));
  std::string bad_magic = file;
  bad_magic[0] = 'X';
  CHECK(!decode_tag_file(bad_magic));
}
