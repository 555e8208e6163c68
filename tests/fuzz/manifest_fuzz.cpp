// libFuzzer target for the manifest parser (F1): deploy::parse_manifest must return a
// manifest or an error for any text, never crash, hang or leak.
#include "deploy/manifest.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char*>(data), size);
  auto requests = specjit::deploy::parse_manifest(text, "fuzz.json");
  if (!requests)
    llvm::consumeError(requests.takeError());
  return 0;
}
