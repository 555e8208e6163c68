// Dependency manifests: what the encoder writes decodes to the same sets, and so does any
// other JSON spelling of them (which takes the general parser), while damaged or foreign
// manifests are corrupt either way.
#include "cache/deps_manifest.h"

#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/JSON.h>

using namespace specjit;
using namespace specjit::cache;

namespace {

const Digest128 k_definition = hash128("a definition");

std::vector<DependencySet> sample_sets() {
  DependencySet first = {{"cute/tensor.hpp", 1, hash128("tensor")},
                         {"cuda/std/cstdint", 2, hash128("cstdint")},
                         {"vector_types.h", 13, hash128("vector types")}};
  DependencySet second = {{"cute/layout.hpp", 0, hash128("layout")}};
  return {first, second, {}};
}

// The body re-printed with llvm::json's indentation, re-checksummed: the same JSON value,
// not the encoder's spelling.
std::string pretty(const std::string& manifest) {
  llvm::StringRef body = llvm::StringRef(manifest).split('\n').second;
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(body);
  REQUIRE(static_cast<bool>(value));
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", *value);
  os.flush();
  return "specjit-deps 1 " + hash128(text).hex() + "\n" + text;
}

std::string with_body(const std::string& body) {
  return "specjit-deps 1 " + hash128(body).hex() + "\n" + body;
}

bool is_corrupt(llvm::Expected<std::vector<DependencySet>> sets) {
  if (sets)
    return false;
  return summarize(sets.takeError()).code == Errc::corrupt;
}

} // namespace

TEST_CASE("a manifest decodes to the sets it was encoded from, in either spelling") {
  std::string manifest = encode_deps_manifest(k_definition, sample_sets());
  auto decoded = decode_deps_manifest(manifest, k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(decoded), llvm::toString(decoded.takeError()));
  CHECK(*decoded == sample_sets());

  std::string indented = pretty(manifest);
  REQUIRE(indented != manifest);
  auto general = decode_deps_manifest(indented, k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(general), llvm::toString(general.takeError()));
  CHECK(*general == sample_sets());

  auto none = decode_deps_manifest(encode_deps_manifest(k_definition, {}), k_definition);
  REQUIRE(static_cast<bool>(none));
  CHECK(none->empty());
}

TEST_CASE("names with escapes or non-ASCII bytes decode as the general parser reads them") {
  std::vector<DependencySet> sets = {{{"odd \"quoted\"\\name.h", 0, hash128("a")},
                                      {"caf\xc3\xa9/h\xc3\xa9"
                                       "ader.h",
                                       1, hash128("b")}}};
  auto decoded = decode_deps_manifest(encode_deps_manifest(k_definition, sets), k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(decoded), llvm::toString(decoded.takeError()));
  CHECK(*decoded == sets);
}

TEST_CASE("a damaged, malformed or foreign manifest is corrupt") {
  std::string manifest = encode_deps_manifest(k_definition, sample_sets());
  CHECK(is_corrupt(decode_deps_manifest(manifest, hash128("another definition"))));
  std::string flipped = manifest;
  flipped[flipped.size() / 2] ^= 0x01;
  CHECK(is_corrupt(decode_deps_manifest(flipped, k_definition)));
  CHECK(is_corrupt(decode_deps_manifest("specjit-deps 2 " + manifest.substr(15), k_definition)));

  const std::string definition = "\"definition\":\"" + k_definition.hex() + "\"";
  const std::string digest = "\"digest\":\"" + hash128("x").hex() + "\"";
  for (const std::string& body : {
           "{" + definition + ",\"sets\":[[{" + digest + ",\"dir\":0,\"name\":\"\"}]]}",
           "{" + definition + ",\"sets\":[[{" + digest + ",\"dir\":-1,\"name\":\"a.h\"}]]}",
           "{" + definition + ",\"sets\":[[{" + digest + ",\"dir\":4294967296,\"name\":\"a.h\"}]]}",
           "{" + definition + ",\"sets\":[[{\"digest\":\"00\",\"dir\":0,\"name\":\"a.h\"}]]}",
           "{" + definition + ",\"sets\":[[{" + digest + ",\"dir\":0}]]}",
           "{" + definition + ",\"sets\":[[{" + digest + ",\"dir\":0,\"name\":\"a.h\"}]",
           "{" + definition + ",\"sets\":{}}",
           "{\"definition\":\"" + k_definition.hex().substr(1) + "0\",\"sets\":[]}",
       })
    CHECK_MESSAGE(is_corrupt(decode_deps_manifest(with_body(body), k_definition)), body);
}

TEST_CASE("a digest in upper case decodes as it always did") {
  const std::string definition = "\"definition\":\"" + k_definition.hex() + "\"";
  std::string upper = hash128("x").hex();
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto decoded = decode_deps_manifest(with_body("{" + definition + ",\"sets\":[[{\"digest\":\"" +
                                                upper + "\",\"dir\":7,\"name\":\"a.h\"}]]}"),
                                      k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(decoded), llvm::toString(decoded.takeError()));
  REQUIRE(decoded->size() == 1);
  CHECK((*decoded)[0] == DependencySet{{"a.h", 7, hash128("x")}});
}

TEST_CASE("the fuzzer's seed bodies decode, in either spelling") {
  // tests/fuzz/deps_manifest_fuzz.cpp wraps these bodies with the header and checksum and
  // decodes them for this definition: a refused seed would leave the accepting paths unfuzzed.
  const std::string corpus = std::string(SPECJIT_SOURCE_DIR) + "/tests/fuzz/corpus/deps_manifest/";
  auto canonical = decode_deps_manifest(
      with_body(specjit::test::read_file(corpus + "canonical.json")), k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(canonical), llvm::toString(canonical.takeError()));
  CHECK(canonical->size() == 3);
  auto general = decode_deps_manifest(with_body(specjit::test::read_file(corpus + "general.json")),
                                      k_definition);
  REQUIRE_MESSAGE(static_cast<bool>(general), llvm::toString(general.takeError()));
  REQUIRE(general->size() == 1);
  CHECK((*general)[0][0].name == "caf\xc3\xa9.h");
}
