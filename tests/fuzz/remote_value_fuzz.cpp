// libFuzzer target for the fleet tier's values (F1): cache::remote_value_decode reads what a
// shared Redis holds, which anyone with access to it may have written. For any bytes it must
// accept or refuse without crashing, reading out of bounds or trusting a length. The entry inside
// is looked up under the key its own header names (else a fixed key), so that mutated values
// reach the tag check and decode_entry; a value it accepts must be what the writer writes for
// that entry, and the writer's tagged value must pass under its trust key and no other.
#include "cache/remote_value.h"

#include <llvm/Support/Endian.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace specjit;

namespace {

constexpr uint64_t k_max_bytes = 1 << 20;

const cache::TrustKey& trust_key(char fill) {
  static const cache::TrustKey a = *cache::TrustKey::from_file_bytes(std::string(32, 'a'));
  static const cache::TrustKey b = *cache::TrustKey::from_file_bytes(std::string(32, 'b'));
  return fill == 'a' ? a : b;
}

// The entry's own key, when what follows the header and the announced tag decodes as an entry.
std::optional<Digest128> inner_key(llvm::StringRef value) {
  if (value.size() < cache::k_remote_value_header_size)
    return std::nullopt;
  const uint32_t tag_size = llvm::support::endian::read32le(value.data() + 12);
  if (tag_size > value.size() - cache::k_remote_value_header_size)
    return std::nullopt;
  auto decoded = cache::decode_entry(value.drop_front(cache::k_remote_value_header_size + tag_size),
                                     std::nullopt);
  if (!decoded) {
    llvm::consumeError(decoded.takeError());
    return std::nullopt;
  }
  return decoded->key;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef value(reinterpret_cast<const char*>(data), size);
  const Digest128 key = inner_key(value).value_or(Digest128{});
  const cache::RemoteTrust trusted{true, &trust_key('a')};
  for (const cache::RemoteTrust& trust : {cache::RemoteTrust{}, trusted}) {
    auto entry = cache::remote_value_decode(value, key, k_max_bytes, trust);
    if (!entry) {
      llvm::consumeError(entry.takeError());
      continue;
    }
    // Accepted: an untagged value (or any value under trust) is exactly what the writer writes.
    const bool tagged = llvm::support::endian::read16le(value.data() + 10) != 0;
    if ((trust.required || !tagged) && cache::remote_value_encode(*entry, key, trust) != value)
      std::abort();
    // The writer's tagged value passes under its key and is refused under another.
    const std::string signed_value = cache::remote_value_encode(*entry, key, trusted);
    auto ok = cache::remote_value_decode(signed_value, key, k_max_bytes, trusted);
    if (!ok)
      std::abort();
    auto other = cache::remote_value_decode(signed_value, key, k_max_bytes,
                                            cache::RemoteTrust{true, &trust_key('b')});
    if (other)
      std::abort();
    llvm::consumeError(other.takeError());
  }
  return 0;
}
