// libFuzzer target for dependency manifests (F1): cache::decode_deps_manifest reads files of the
// cache's layers, read-only image layers included, whose writer may be anyone who could write
// there and compute a checksum. The input is a manifest's body; the target adds the header and
// checksum, so mutations reach the parsers instead of stopping at the checksum. Its reader has a
// fast scanner for the encoder's own spelling and falls back to llvm::json for any other: the
// body re-printed with indentation (the same JSON value, which the scanner never takes) must
// decode to the same sets or be refused the same, and accepted sets must survive the encoder.
#include "cache/deps_manifest.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace specjit;

namespace {

// The definition the seeds (tests/fuzz/corpus/deps_manifest) name.
const Digest128 k_definition = hash128("a definition");

llvm::Expected<std::vector<cache::DependencySet>> decode(llvm::StringRef body) {
  return cache::decode_deps_manifest(cache::frame_deps_manifest(body), k_definition);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef body(reinterpret_cast<const char*>(data), size);
  auto sets = decode(body);
  if (auto value = llvm::json::parse(body)) {
    std::string pretty;
    llvm::raw_string_ostream os(pretty);
    os << llvm::formatv("{0:2}", *value);
    os.flush();
    auto general = decode(pretty);
    if (static_cast<bool>(sets) != static_cast<bool>(general) || (sets && *sets != *general)) {
      llvm::errs() << "the scanner and the general parser disagree on:\n" << body << "\n";
      std::abort();
    }
    if (!general)
      llvm::consumeError(general.takeError());
  } else {
    llvm::consumeError(value.takeError());
  }
  if (!sets) {
    llvm::consumeError(sets.takeError());
    return 0;
  }
  auto again =
      cache::decode_deps_manifest(cache::encode_deps_manifest(k_definition, *sets), k_definition);
  if (!again || *again != *sets)
    std::abort();
  return 0;
}
