#include "cache/remote_store.h"

#include <hiredis/hiredis.h>

#include <fmt/format.h>

#include <sys/time.h>

namespace specjit::cache {

char RemoteUnavailableError::ID = 0;

void RemoteUnavailableError::log(llvm::raw_ostream& os) const {
  os << (m_skipped ? "remote skipped (backing off after: " + m_detail + ")" : m_detail);
}

std::error_code RemoteUnavailableError::convertToErrorCode() const {
  return std::make_error_code(std::errc::host_unreachable);
}

// One reply, freed with it; `ok` is false for error replies (text holds the server's message).
struct RemoteStore::Reply {
  std::unique_ptr<redisReply, void (*)(void*)> raw{nullptr, freeReplyObject};
  int type() const { return raw->type; }
  llvm::StringRef text() const { return llvm::StringRef(raw->str, raw->len); }
  long long integer() const { return raw->integer; }
};

namespace {

timeval to_timeval(int64_t ms) {
  return timeval{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

// Error replies after which the server is of no use until something changes on its side.
bool unusable_server(llvm::StringRef message) {
  return message.startswith("NOAUTH") || message.startswith("WRONGPASS") ||
         message.startswith("ERR invalid password") || message.startswith("LOADING") ||
         message.startswith("ERR AUTH");
}

// Releases a lock only for its holder: the token must still be the value.
constexpr llvm::StringLiteral k_remove_if_equal =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

} // namespace

RemoteStore::RemoteStore(RemoteUrl url, std::string password, RemoteListener listener)
    : m_url(std::move(url)), m_password(std::move(password)), m_listener(std::move(listener)) {
  if (m_password.empty())
    m_password = m_url.password;
}

RemoteStore::~RemoteStore() {
  if (m_context != nullptr)
    redisFree(m_context);
}

bool RemoteStore::backing_off() const { return m_backing_off.load(std::memory_order_relaxed); }

llvm::Error RemoteStore::fail_locked(std::string detail) {
  if (m_context != nullptr)
    redisFree(m_context);
  m_context = nullptr;
  m_retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(m_url.backoff_ms);
  m_backing_off.store(m_url.backoff_ms > 0, std::memory_order_relaxed);
  if (!m_down && m_listener)
    m_listener({false, detail, m_url.backoff_ms});
  m_down = true;
  return llvm::make_error<RemoteUnavailableError>(std::move(detail), false);
}

void RemoteStore::succeed_locked() {
  m_backing_off.store(false, std::memory_order_relaxed);
  if (m_down && m_listener)
    m_listener({true, "", 0});
  m_down = false;
}

llvm::Error RemoteStore::connect_locked() {
  std::string where = fmt::format("{}:{}", m_url.host, m_url.port);
  m_context = redisConnectWithTimeout(m_url.host.c_str(), m_url.port,
                                      to_timeval(m_url.connect_timeout_ms));
  if (m_context == nullptr)
    return fail_locked("cannot connect to " + where + ": out of memory");
  if (m_context->err != 0)
    return fail_locked(fmt::format("cannot connect to {} within {} ms: {}", where,
                                   m_url.connect_timeout_ms, m_context->errstr));
  redisSetTimeout(m_context, to_timeval(m_url.op_timeout_ms));
  auto handshake = [&](std::vector<const char*> argv, const char* what) -> llvm::Error {
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(m_context, static_cast<int>(argv.size()), argv.data(), nullptr));
    if (raw == nullptr)
      return fail_locked(fmt::format("{} {}: {}", what, where, m_context->errstr));
    std::string message = raw->type == REDIS_REPLY_ERROR ? std::string(raw->str, raw->len) : "";
    freeReplyObject(raw);
    if (!message.empty())
      return fail_locked(fmt::format("{} {} refused: {}", what, where, message));
    return llvm::Error::success();
  };
  if (!m_password.empty())
    if (auto err = handshake({"AUTH", m_password.c_str()}, "authenticating to"))
      return err;
  if (m_url.db != 0) {
    std::string db = std::to_string(m_url.db);
    if (auto err = handshake({"SELECT", db.c_str()}, "selecting the database on"))
      return err;
  }
  return llvm::Error::success();
}

llvm::Expected<RemoteStore::Reply> RemoteStore::command(const std::vector<llvm::StringRef>& args) {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_context == nullptr) {
    if (m_down && std::chrono::steady_clock::now() < m_retry_at)
      return llvm::make_error<RemoteUnavailableError>("the last attempt failed", true);
    if (auto err = connect_locked())
      return err;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (llvm::StringRef arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  Reply reply;
  reply.raw.reset(static_cast<redisReply*>(redisCommandArgv(
      m_context, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (!reply.raw) {
    bool timed_out = m_context->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    return fail_locked(timed_out ? fmt::format("{} on {}:{}: no answer within {} ms",
                                               args.front().str(), m_url.host, m_url.port,
                                               m_url.op_timeout_ms)
                                 : fmt::format("{} on {}:{}: {}", args.front().str(), m_url.host,
                                               m_url.port, m_context->errstr));
  }
  if (reply.type() == REDIS_REPLY_ERROR && unusable_server(reply.text()))
    return fail_locked(fmt::format("{}:{} refused {}: {}", m_url.host, m_url.port,
                                   args.front().str(), reply.text().str()));
  succeed_locked();
  if (reply.type() == REDIS_REPLY_ERROR)
    return llvm::createStringError(std::errc::io_error, "%s on %s:%d: %s", args.front().str().c_str(),
                                   m_url.host.c_str(), m_url.port, reply.text().str().c_str());
  return reply;
}

llvm::Expected<std::optional<std::string>> RemoteStore::get(llvm::StringRef name,
                                                            uint64_t max_bytes) {
  std::string last = std::to_string(max_bytes);
  auto reply = command({"GETRANGE", name, "0", last});
  if (!reply)
    return reply.takeError();
  // A missing name reads as the empty string; no value this tier writes is empty.
  if (reply->type() != REDIS_REPLY_STRING || reply->text().empty())
    return std::nullopt;
  return reply->text().str();
}

llvm::Expected<bool> RemoteStore::set(llvm::StringRef name, llvm::StringRef value,
                                      bool only_if_absent, int64_t ttl_ms) {
  std::vector<llvm::StringRef> args = {"SET", name, value};
  std::string ttl = std::to_string(ttl_ms);
  if (only_if_absent)
    args.push_back("NX");
  if (ttl_ms > 0) {
    args.push_back("PX");
    args.push_back(ttl);
  }
  auto reply = command(args);
  if (!reply)
    return reply.takeError();
  return reply->type() == REDIS_REPLY_STATUS; // NX on an existing name answers nil
}

llvm::Expected<bool> RemoteStore::remove_if_equal(llvm::StringRef name, llvm::StringRef value) {
  auto reply = command({"EVAL", k_remove_if_equal, "1", name, value});
  if (!reply)
    return reply.takeError();
  return reply->type() == REDIS_REPLY_INTEGER && reply->integer() == 1;
}

llvm::Expected<bool> RemoteStore::exists(llvm::StringRef name) {
  auto reply = command({"EXISTS", name});
  if (!reply)
    return reply.takeError();
  return reply->type() == REDIS_REPLY_INTEGER && reply->integer() == 1;
}

llvm::Expected<bool> RemoteStore::remove(llvm::StringRef name) {
  auto reply = command({"DEL", name});
  if (!reply)
    return reply.takeError();
  return reply->type() == REDIS_REPLY_INTEGER && reply->integer() == 1;
}

llvm::Expected<std::vector<std::string>> RemoteStore::scan(llvm::StringRef pattern, size_t limit) {
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    auto reply = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!reply)
      return reply.takeError();
    if (reply->type() != REDIS_REPLY_ARRAY || reply->raw->elements != 2)
      return llvm::createStringError(std::errc::protocol_error, "SCAN: unexpected reply");
    redisReply* next = reply->raw->element[0];
    redisReply* batch = reply->raw->element[1];
    cursor.assign(next->str, next->len);
    for (size_t i = 0; i < batch->elements && names.size() < limit; ++i)
      names.emplace_back(batch->element[i]->str, batch->element[i]->len);
  } while (cursor != "0" && names.size() < limit);
  return names;
}

llvm::Expected<std::string> RemoteStore::info() {
  auto reply = command({"INFO"});
  if (!reply)
    return reply.takeError();
  return reply->text().str();
}

llvm::Expected<double> RemoteStore::ping() {
  auto start = std::chrono::steady_clock::now();
  auto reply = command({"PING"});
  if (!reply)
    return reply.takeError();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace specjit::cache
