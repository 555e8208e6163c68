// The export file's format on its own (cache/export_format.h): what the writer writes the reader
// reads back, version 1 files are still read, and every malformed file is refused by name.
#include "cache/export_format.h"

#include "cache/entry_auth.h"
#include "cache/remote_value.h"

#include "test_support.h"

#include <llvm/Support/Endian.h>

#include <doctest/doctest.h>

#include <string>

using namespace specjit::cache;

namespace {

std::string error_of(llvm::StringRef bytes) {
  auto records = decode_export(bytes);
  REQUIRE_FALSE(static_cast<bool>(records));
  return llvm::toString(records.takeError());
}

// Two records: one untagged, one tagged (any 32 bytes: this layer does not check tags).
std::string two_records(Tag& tag) {
  for (size_t i = 0; i < tag.size(); ++i)
    tag[i] = static_cast<uint8_t>(i * 7 + 1);
  ExportWriter writer;
  writer.add("scale_tokens", "entry bytes one");
  writer.add("fused_moe_gemm1", std::string(1000, 'x'), tag);
  CHECK(writer.count() == 2);
  return writer.file();
}

} // namespace

TEST_CASE("an export file reads back as written, tags included") {
  Tag tag{};
  const std::string file = two_records(tag);
  auto records = decode_export(file);
  REQUIRE_MESSAGE(static_cast<bool>(records), llvm::toString(records.takeError()));
  REQUIRE(records->size() == 2);
  CHECK((*records)[0].kernel == "scale_tokens");
  CHECK((*records)[0].entry == "entry bytes one");
  CHECK((*records)[0].tag.empty());
  CHECK((*records)[1].kernel == "fused_moe_gemm1");
  CHECK((*records)[1].entry == std::string(1000, 'x'));
  CHECK((*records)[1].tag ==
        llvm::StringRef(reinterpret_cast<const char*>(tag.data()), tag.size()));
  auto empty = decode_export(ExportWriter().file());
  REQUIRE(static_cast<bool>(empty));
  CHECK(empty->empty());
}

TEST_CASE("a version 1 export file (no tags) is still read") {
  std::string file = "SPJTEXPT";
  auto put = [&](uint64_t value, int bytes) {
    char buffer[8];
    llvm::support::endian::write64le(buffer, value);
    file.append(buffer, bytes);
  };
  put(1, 4); // version
  put(0, 4); // reserved
  put(1, 8); // count
  put(3, 4);
  file += "abc";
  put(5, 8);
  file += "entry";
  auto records = decode_export(file);
  REQUIRE_MESSAGE(static_cast<bool>(records), llvm::toString(records.takeError()));
  REQUIRE(records->size() == 1);
  CHECK((*records)[0].kernel == "abc");
  CHECK((*records)[0].entry == "entry");
  CHECK((*records)[0].tag.empty());
}

TEST_CASE("every truncation of an export file is refused, never read past its end") {
  Tag tag{};
  const std::string file = two_records(tag);
  for (size_t size = 0; size < file.size(); ++size) {
    // A copy of exactly `size` bytes: under ASan a read past it is caught.
    const std::string cut = file.substr(0, size);
    CHECK_FALSE_MESSAGE(static_cast<bool>(decode_export(cut)), "accepted ", size, " bytes");
    llvm::consumeError(decode_export(cut).takeError());
  }
}

TEST_CASE("a malformed export file is refused with what is wrong") {
  Tag tag{};
  const std::string file = two_records(tag);
  using llvm::support::endian::write32le;
  using llvm::support::endian::write64le;

  std::string magic = file;
  magic[0] = 'X';
  CHECK(error_of(magic).find("bad magic") != std::string::npos);

  std::string version = file;
  write32le(&version[8], 3);
  CHECK(error_of(version).find("version 3 is not supported") != std::string::npos);

  std::string count = file;
  write64le(&count[16], ~uint64_t{0});
  CHECK(error_of(count).find("more than its size allows") != std::string::npos);

  std::string kernel = file;
  write32le(&kernel[24], k_max_export_kernel_size + 1);
  CHECK(error_of(kernel).find("bad kernel name in record 0") != std::string::npos);

  std::string entry = file;
  write64le(&entry[24 + 4 + 12], ~uint64_t{0});
  CHECK(error_of(entry).find("bad entry length in record 0") != std::string::npos);

  std::string tag_size = file;
  write32le(&tag_size[24 + 4 + 12 + 8 + 15], 31);
  CHECK(error_of(tag_size).find("bad tag length in record 0") != std::string::npos);

  CHECK(error_of(file + "z").find("1 trailing bytes") != std::string::npos);
}

TEST_CASE("the fuzzers' seeds of export files and remote values are accepted") {
  // tests/fuzz mutates these: a seed that is refused would leave the accepting paths unfuzzed.
  const std::string corpus = std::string(SPECJIT_SOURCE_DIR) + "/tests/fuzz/corpus/";
  const std::string file = specjit::test::read_file(corpus + "export/two_records.sjx");
  auto records = decode_export(file);
  REQUIRE_MESSAGE(static_cast<bool>(records), llvm::toString(records.takeError()));
  REQUIRE(records->size() == 2);
  for (const ExportRecord& record : *records) {
    auto entry = decode_entry(record.entry, std::nullopt);
    REQUIRE_MESSAGE(static_cast<bool>(entry), llvm::toString(entry.takeError()));
    CHECK(record.kernel == entry->metadata.key_inputs.kernel);
  }
  const std::string value = specjit::test::read_file(corpus + "remote_value/scale_tokens_2.value");
  auto inner =
      decode_entry(llvm::StringRef(value).drop_front(k_remote_value_header_size), std::nullopt);
  REQUIRE_MESSAGE(static_cast<bool>(inner), llvm::toString(inner.takeError()));
  auto entry = remote_value_decode(value, inner->key, 1 << 20);
  REQUIRE_MESSAGE(static_cast<bool>(entry), llvm::toString(entry.takeError()));
  CHECK(remote_value_encode(*entry, inner->key) == value);
}
