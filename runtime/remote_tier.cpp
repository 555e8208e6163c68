#include "runtime/remote_tier.h"

#include "cache/remote_value.h"
#include "support/error.h"
#include "support/logging.h"

#include <llvm/Support/MemoryBuffer.h>

#include <chrono>
#include <fmt/format.h>

namespace specjit::runtime {

namespace {

constexpr uint64_t k_max_password_file_bytes = 4096;

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

llvm::Expected<std::string> read_password(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return make_error(Errc::io, "SPECJIT_REMOTE_PASSWORD_FILE {}: {}", path,
                      buffer.getError().message());
  if ((*buffer)->getBufferSize() > k_max_password_file_bytes)
    return make_error(Errc::invalid_argument,
                      "SPECJIT_REMOTE_PASSWORD_FILE {}: larger than {} bytes", path,
                      k_max_password_file_bytes);
  return (*buffer)->getBuffer().rtrim("\r\n").str();
}

} // namespace

llvm::Expected<std::unique_ptr<cache::RemoteStore>>
open_remote_store(const Config& config, cache::RemoteListener listener) {
  if (!config.remote.value)
    return make_error(Errc::not_found, "no remote is configured (SPECJIT_REMOTE)");
  std::string password;
  if (!config.remote_password_file.value.empty()) {
    auto text = read_password(config.remote_password_file.value);
    if (!text)
      return text.takeError();
    password = std::move(*text);
  }
  return std::make_unique<cache::RemoteStore>(*config.remote.value, std::move(password),
                                              std::move(listener));
}

std::unique_ptr<RemoteTier> open_remote_tier(const Config& config, cache::DiskStore& local,
                                             EventLog& log) {
  if (!config.remote.value)
    return nullptr;
  std::string where = config.remote.value->redacted();
  // The log outlives the tier (both belong to the engine).
  cache::RemoteListener listener = [&log, where](const cache::RemoteTransition& change) {
    llvm::json::Object event{{"event", change.up ? "remote_up" : "remote_down"}, {"remote", where}};
    if (!change.up) {
      event["detail"] = change.detail;
      event["backoff_ms"] = change.backoff_ms;
      log_warning(llvm::Twine("the remote cache is unavailable (") + change.detail +
                  "); working from the local cache for " + llvm::Twine(change.backoff_ms) +
                  " ms before trying again");
    }
    log.write(std::move(event));
  };
  auto store = open_remote_store(config, std::move(listener));
  if (!store) {
    log_warning(llvm::Twine("the remote cache is off: ") + llvm::toString(store.takeError()));
    return nullptr;
  }
  return std::make_unique<RemoteTier>(std::move(*store), local, log, config.trust_key_file.value);
}

RemoteTier::RemoteTier(std::unique_ptr<cache::RemoteStore> store, cache::DiskStore& local,
                       EventLog& log, const std::string& trust_key_file)
    : m_store(std::move(store)), m_log(log), m_trust_required(!trust_key_file.empty()),
      m_copies(local) {
  if (!m_trust_required)
    return;
  // A key that cannot be loaded trusts nothing fetched (the disk store says why, once).
  if (auto key = cache::load_trust_key(trust_key_file))
    m_trust_key = *key;
  else
    llvm::consumeError(key.takeError());
}

void RemoteTier::write_event(const llvm::json::Object& base, llvm::StringRef name,
                             llvm::json::Object extra) {
  llvm::json::Object event(base);
  event["event"] = name.str();
  for (auto& [field, value] : extra)
    event[field] = std::move(value);
  m_log.write(std::move(event));
}

std::optional<RemoteEntry> RemoteTier::verify(const Digest128& key, std::string value,
                                              const llvm::json::Object& base, double ms) {
  RemoteEntry found{std::make_shared<const std::string>(std::move(value)), {}};
  auto bytes =
      cache::remote_value_decode(*found.value, key, m_store->url().max_value_bytes, trust());
  llvm::Expected<cache::DecodedEntry> decoded =
      bytes ? cache::decode_entry(*bytes, key) : bytes.takeError();
  if (!decoded) {
    write_event(base, "remote_corrupt",
                llvm::json::Object{{"detail", llvm::toString(decoded.takeError())}});
    return std::nullopt;
  }
  found.entry = std::move(*decoded);
  // The bytes are used now; their local copy is written behind the request, unsynced: the
  // remote still holds them, and a copy torn by a crash is a verified miss.
  std::string kernel = found.entry.metadata.key_inputs.kernel;
  llvm::json::Object failed(base);
  m_copies.enqueue({key, std::move(kernel), found.value, *bytes,
                    [this, failed = std::move(failed)](const std::string& path, llvm::Error error) {
                      write_event(failed, "write_failed",
                                  llvm::json::Object{{"path", path},
                                                     {"detail", llvm::toString(std::move(error))}});
                    }});
  write_event(base, "remote_hit", llvm::json::Object{{"ms", ms + 0.0}, {"layer", "remote"}});
  return found;
}

std::optional<RemoteEntry> RemoteTier::fetch(const Digest128& key, const llvm::json::Object& base) {
  auto start = std::chrono::steady_clock::now();
  auto value = m_store->get(cache::remote_entry_name(key), m_store->url().max_value_bytes);
  if (!value) {
    llvm::consumeError(value.takeError()); // reported once by the listener
    return std::nullopt;
  }
  if (!*value)
    return std::nullopt;
  return verify(key, std::move(**value), base, milliseconds_since(start));
}

RemoteTier::Flight RemoteTier::single_flight(const Digest128& key, const llvm::json::Object& base) {
  Flight flight;
  if (read_only() || m_store->backing_off())
    return flight;
  auto start = std::chrono::steady_clock::now();
  cache::FleetWait wait = cache::acquire_or_wait(*m_store, key);
  flight.lock = std::move(wait.lock);
  if (wait.contended)
    write_event(base, "remote_wait",
                llvm::json::Object{{"ms", static_cast<int64_t>(wait.waited_ms)},
                                   {"outcome", wait.value           ? "published"
                                               : flight.lock.held() ? "locked"
                                                                    : "gave_up"}});
  if (wait.value)
    flight.entry = verify(key, std::move(*wait.value), base, milliseconds_since(start));
  return flight;
}

void RemoteTier::push(const Digest128& key, llvm::StringRef entry_bytes,
                      const llvm::json::Object& base) {
  if (read_only())
    return;
  std::string value = cache::remote_value_encode(entry_bytes, key, trust());
  if (value.size() > m_store->url().max_value_bytes) {
    write_event(base, "remote_write_failed",
                llvm::json::Object{
                    {"detail", fmt::format("{} bytes, more than max_value_bytes", value.size())}});
    return;
  }
  auto stored = m_store->set(cache::remote_entry_name(key), value, /*only_if_absent=*/false);
  if (stored)
    return;
  // Unavailability is reported once, by the listener; anything else (a full server) here.
  std::string detail;
  llvm::handleAllErrors(
      stored.takeError(), [](const cache::RemoteUnavailableError&) {},
      [&](const llvm::ErrorInfoBase& other) { detail = other.message(); });
  if (!detail.empty())
    write_event(base, "remote_write_failed", llvm::json::Object{{"detail", detail}});
}

} // namespace specjit::runtime
