#include "cache/entry_auth.h"

#include "cache/file_io.h"
#include "support/error.h"

#include <llvm/Support/Endian.h>

#include <sodium.h>

#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace specjit::cache {

namespace {

constexpr llvm::StringLiteral k_domain = "specjit-entry-tag-v1";

// sodium_init picks implementations and seeds its generator; idempotent and thread-safe,
// but its result must be checked once before any other call.
bool sodium_ready() {
  static bool ready = sodium_init() >= 0;
  return ready;
}

static_assert(crypto_auth_hmacsha512256_BYTES == k_tag_size);
static_assert(crypto_auth_hmacsha512256_KEYBYTES == 32);

} // namespace

llvm::Expected<TrustKey> TrustKey::from_file_bytes(llvm::StringRef bytes) {
  if (bytes.size() < k_min_file_bytes)
    return make_error(Errc::invalid_argument,
                      "the trust key file holds {} bytes; at least {} are needed", bytes.size(),
                      k_min_file_bytes);
  if (!sodium_ready())
    return make_error(Errc::unsupported, "libsodium cannot be initialised");
  TrustKey key;
  crypto_generichash(key.m_bytes.data(), key.m_bytes.size(),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), nullptr,
                     0);
  return key;
}

llvm::Expected<TrustKey> load_trust_key(const std::string& path) {
  UniqueFd fd;
  if (int err = open_for_read(path, fd))
    return make_error(Errc::io, "cannot open the trust key file '{}': {}{}", path,
                      errno_text(err), err == ELOOP ? " (symbolic links are not followed)" : "");
  struct stat st;
  if (int err = stat_fd(fd.get(), path, st))
    return io_error(IoOp::stat, path, err);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::invalid_argument, "the trust key file '{}' is not a regular file",
                      path);
  if (st.st_uid != ::geteuid())
    return make_error(Errc::invalid_argument,
                      "the trust key file '{}' is owned by uid {}, not by this user (uid {})", path,
                      st.st_uid, ::geteuid());
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return make_error(Errc::invalid_argument,
                      "the trust key file '{}' is accessible to group or others (mode {:o}); "
                      "chmod 600 it",
                      path, st.st_mode & 0777);
  if (static_cast<uint64_t>(st.st_size) > TrustKey::k_max_file_bytes)
    return make_error(Errc::invalid_argument, "the trust key file '{}' is larger than {} bytes",
                      path, TrustKey::k_max_file_bytes);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  if (int err = read_up_to(fd.get(), path, bytes.data(), bytes.size(), got))
    return io_error(IoOp::read, path, err);
  bytes.resize(got);
  llvm::Expected<TrustKey> key = TrustKey::from_file_bytes(bytes);
  sodium_memzero(bytes.data(), bytes.size());
  if (!key)
    return make_error(Errc::invalid_argument, "{}: {}", path, llvm::toString(key.takeError()));
  return key;
}

Tag compute_tag(const TrustKey& key, const Digest128& digest, llvm::StringRef entry_bytes) {
  (void)sodium_ready();
  unsigned char key_digest[16];
  llvm::support::endian::write64le(key_digest, digest.high);
  llvm::support::endian::write64le(key_digest + 8, digest.low);
  crypto_auth_hmacsha512256_state state;
  crypto_auth_hmacsha512256_init(&state, key.bytes().data(), key.bytes().size());
  crypto_auth_hmacsha512256_update(&state, reinterpret_cast<const unsigned char*>(k_domain.data()),
                                   k_domain.size());
  crypto_auth_hmacsha512256_update(&state, key_digest, sizeof key_digest);
  crypto_auth_hmacsha512256_update(
      &state, reinterpret_cast<const unsigned char*>(entry_bytes.data()), entry_bytes.size());
  Tag tag;
  crypto_auth_hmacsha512256_final(&state, tag.data());
  return tag;
}

bool verify_tag(const TrustKey& key, const Digest128& digest, llvm::StringRef entry_bytes,
                llvm::ArrayRef<uint8_t> tag) {
  if (tag.size() != k_tag_size)
    return false;
  Tag expected = compute_tag(key, digest, entry_bytes);
  return sodium_memcmp(expected.data(), tag.data(), k_tag_size) == 0;
}

std::string encode_tag_file(const Tag& tag) {
  std::string bytes(k_tag_magic.data(), k_tag_magic.size());
  bytes.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return bytes;
}

std::optional<Tag> decode_tag_file(llvm::StringRef bytes) {
  if (bytes.size() != k_tag_file_size || !bytes.startswith(k_tag_magic))
    return std::nullopt;
  Tag tag;
  std::memcpy(tag.data(), bytes.data() + k_tag_magic.size(), k_tag_size);
  return tag;
}

} // namespace specjit::cache
