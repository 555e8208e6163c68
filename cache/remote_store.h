// A connection to the fleet's Redis (hiredis): bytes in, bytes out, never slower than its
// timeouts. Every command either answers within op_timeout_ms (connecting: connect_timeout_ms)
// or fails; after a failure the server is skipped for backoff_ms (commands fail at once with
// RemoteUnavailableError, skipped() true) and then tried again. The listener hears each change
// between up and down once, so a dead server is reported once, not per request.
//
// Server-side refusals that mean "not usable at all" (a wrong or missing password, a server
// still loading) count as failures; ordinary error replies (out of memory, wrong type) are
// errors of that command only. Thread-safe: one connection, one command at a time.
#pragma once

#include "support/remote_url.h"

#include <llvm/Support/Error.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct redisContext;

namespace specjit::cache {

class RemoteUnavailableError : public llvm::ErrorInfo<RemoteUnavailableError> {
public:
  static char ID;
  RemoteUnavailableError(std::string detail, bool skipped)
      : m_detail(std::move(detail)), m_skipped(skipped) {}
  const std::string& detail() const { return m_detail; }
  // True when nothing was sent: the server is in its back-off period.
  bool skipped() const { return m_skipped; }
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  std::string m_detail;
  bool m_skipped;
};

struct RemoteTransition {
  bool up = false;
  std::string detail;     // why it went down; empty for up
  int64_t backoff_ms = 0; // how long it is now skipped
};
using RemoteListener = std::function<void(const RemoteTransition&)>;

class RemoteStore {
public:
  RemoteStore(RemoteUrl url, std::string password, RemoteListener listener = {});
  ~RemoteStore();
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

  const RemoteUrl& url() const { return m_url; }
  bool backing_off() const;

  // The value, or nullopt when there is none. Reads at most max_bytes + 1 bytes, so that an
  // oversized value costs a bounded read and is recognised as oversized by its length.
  llvm::Expected<std::optional<std::string>> get(llvm::StringRef name, uint64_t max_bytes);
  // SET; only_if_absent: NX (returns false when a value was there). ttl_ms > 0: PX.
  llvm::Expected<bool> set(llvm::StringRef name, llvm::StringRef value, bool only_if_absent,
                           int64_t ttl_ms = 0);
  // Deletes name when it holds exactly `value` (atomically, on the server).
  llvm::Expected<bool> remove_if_equal(llvm::StringRef name, llvm::StringRef value);
  llvm::Expected<bool> exists(llvm::StringRef name);
  llvm::Expected<bool> remove(llvm::StringRef name);
  // Names matching a glob pattern, at most `limit` of them (SCAN, never KEYS).
  llvm::Expected<std::vector<std::string>> scan(llvm::StringRef pattern, size_t limit);
  // INFO's "name:value" lines.
  llvm::Expected<std::string> info();
  // Milliseconds a PING took.
  llvm::Expected<double> ping();

private:
  struct Reply;
  llvm::Expected<Reply> command(const std::vector<llvm::StringRef>& args);
  llvm::Error connect_locked();
  llvm::Error fail_locked(std::string detail);
  void succeed_locked();

  RemoteUrl m_url;
  std::string m_password;
  RemoteListener m_listener;
  std::mutex m_mutex; // guards everything below
  redisContext* m_context = nullptr;
  bool m_down = false;
  std::chrono::steady_clock::time_point m_retry_at;
  std::atomic<bool> m_backing_off{false};
};

} // namespace specjit::cache
