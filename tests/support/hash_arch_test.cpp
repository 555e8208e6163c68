#include "support/arch.h"
#include "support/hash.h"

#include <doctest/doctest.h>

using namespace specjit;

TEST_CASE("tagged fields never collide by moving bytes between fields") {
  FieldHasher a, b;
  a.add("x", llvm::StringRef("ab"));
  a.add("y", llvm::StringRef("c"));
  b.add("x", llvm::StringRef("a"));
  b.add("y", llvm::StringRef("bc"));
  CHECK_FALSE(a.finish() == b.finish());
}

TEST_CASE("the same fields hash the same; a tag or value change changes the digest") {
  auto digest = [](llvm::StringRef tag, int64_t value) {
    FieldHasher h;
    h.add(tag, value);
    return h.finish();
  };
  CHECK(digest("n", 5) == digest("n", 5));
  CHECK_FALSE(digest("n", 5) == digest("n", 6));
  CHECK_FALSE(digest("n", 5) == digest("m", 5));
}

TEST_CASE("bytes hashed in pieces give the digest of the whole") {
  std::string bytes;
  for (uint32_t i = 0; i < 300000; ++i)
    bytes.push_back(static_cast<char>((i * 7919u) >> 3));
  for (size_t piece : {size_t{1}, size_t{240}, size_t{65536}, bytes.size()}) {
    ByteHasher hasher;
    for (size_t at = 0; at < bytes.size(); at += piece)
      hasher.update(llvm::StringRef(bytes).substr(at, piece));
    CHECK(hasher.finish() == hash128(bytes));
  }
  CHECK(ByteHasher().finish() == hash128(""));
}

TEST_CASE("digests round-trip through hex") {
  Digest128 d = hash128("specjit");
  CHECK(d.hex().size() == 32);
  auto back = Digest128::from_hex(d.hex());
  REQUIRE(back.has_value());
  CHECK(*back == d);
  CHECK_FALSE(Digest128::from_hex("xyz").has_value());
  CHECK_FALSE(Digest128::from_hex(std::string(32, 'g')).has_value());
}

TEST_CASE("architectures parse and print") {
  CHECK(Arch::parse("sm_90a")->name() == "sm_90a");
  CHECK(Arch::parse("sm_90")->name() == "sm_90");
  CHECK(Arch::parse("89")->name() == "sm_89");
  CHECK(Arch::parse("sm_100a")->name() == "sm_100a");
  auto bad = Arch::parse("hopper");
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK(llvm::toString(bad.takeError()).find("hopper") != std::string::npos);
  CHECK(Arch::for_device(9, 0).name() == "sm_90a");
  CHECK(Arch::for_device(8, 9).name() == "sm_89");
}
