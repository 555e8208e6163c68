// libFuzzer target for the entry parser (F1): cache::decode_entry must reject or accept any
// bytes without crashing, leaking or allocating more than the input (no length field is
// trusted). Inputs are tried with no expected key and with the header's own key, and a
// decoded entry must re-encode to bytes that decode again.
#include "cache/entry_format.h"

#include <cstddef>
#include <cstdint>

using namespace specjit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char*>(data), size);
  // The checksum stops mutated entries before their metadata; fuzz that parser directly too.
  if (llvm::Expected<cache::EntryMetadata> metadata = cache::metadata_from_json(bytes))
    (void)cache::to_json(*metadata);
  else
    llvm::consumeError(metadata.takeError());
  llvm::Expected<cache::DecodedEntry> any = cache::decode_entry(bytes, std::nullopt);
  if (!any) {
    llvm::consumeError(any.takeError());
    return 0;
  }
  llvm::Expected<cache::DecodedEntry> keyed = cache::decode_entry(bytes, any->key);
  if (!keyed)
    __builtin_trap(); // accepted without a key, rejected under its own key
  std::string again = cache::encode_entry(any->key, any->cubin, any->metadata);
  llvm::Expected<cache::DecodedEntry> round = cache::decode_entry(again, any->key);
  if (!round)
    __builtin_trap();
  return 0;
}
