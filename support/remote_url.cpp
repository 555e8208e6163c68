#include "support/remote_url.h"

#include "support/config.h"
#include "support/error.h"

#include <fmt/format.h>

namespace specjit {

namespace {

llvm::Error bad_url(const std::string& why) {
  return make_error(Errc::invalid_argument, "not a remote URL ({}); expected "
                    "redis://[:password@]host[:port][/db][?connect_timeout_ms=N&...]", why);
}

llvm::Error read_count(llvm::StringRef name, llvm::StringRef text, int64_t minimum,
                       int64_t& out) {
  if (text.getAsInteger(10, out) || out < minimum || out > (int64_t{1} << 40))
    return bad_url(fmt::format("{} must be an integer from {} to 2^40, not '{}'", name.str(),
                               minimum, text.str()));
  return llvm::Error::success();
}

llvm::Error read_parameter(llvm::StringRef name, llvm::StringRef value, RemoteUrl& url) {
  if (name == "connect_timeout_ms")
    return read_count(name, value, 1, url.connect_timeout_ms);
  if (name == "op_timeout_ms")
    return read_count(name, value, 1, url.op_timeout_ms);
  if (name == "backoff_ms")
    return read_count(name, value, 0, url.backoff_ms);
  if (name == "lock_ttl_ms")
    return read_count(name, value, 1, url.lock_ttl_ms);
  if (name == "max_value_bytes") {
    auto size = parse_size(value);
    if (!size)
      return bad_url("max_value_bytes: " + llvm::toString(size.takeError()));
    url.max_value_bytes = *size;
    return llvm::Error::success();
  }
  if (name == "mode") {
    if (value != "rw" && value != "ro")
      return bad_url(fmt::format("mode must be rw or ro, not '{}'", value.str()));
    url.mode = value == "ro" ? RemoteMode::read_only : RemoteMode::read_write;
    return llvm::Error::success();
  }
  return bad_url(fmt::format("unknown parameter '{}'", name.str()));
}

// "host:port" or "[v6]:port".
llvm::Error read_address(llvm::StringRef address, RemoteUrl& url) {
  llvm::StringRef port;
  if (address.consume_front("[")) {
    auto [host, rest] = address.split(']');
    url.host = host.str();
    if (!rest.empty() && !rest.consume_front(":"))
      return bad_url("junk after ']'");
    port = rest;
  } else {
    auto [host, rest] = address.rsplit(':');
    url.host = host.str();
    port = host.size() == address.size() ? llvm::StringRef() : rest;
  }
  if (url.host.empty())
    return bad_url("no host");
  if (!port.empty() && (port.getAsInteger(10, url.port) || url.port < 1 || url.port > 65535))
    return bad_url(fmt::format("port '{}' is not a number from 1 to 65535", port.str()));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<RemoteUrl> parse_remote_url(llvm::StringRef text) {
  RemoteUrl url;
  llvm::StringRef rest = text.trim();
  if (!rest.consume_front("redis://"))
    return bad_url("it must start with redis://");
  auto [authority_and_path, query] = rest.split('?');
  auto [authority, path] = authority_and_path.split('/');
  if (size_t at = authority.rfind('@'); at != llvm::StringRef::npos) {
    llvm::StringRef user_info = authority.take_front(at);
    authority = authority.drop_front(at + 1);
    // redis://:password@host; a user name (ACL) is not supported.
    if (!user_info.consume_front(":"))
      return bad_url("the password must be given as ':password@'");
    url.password = user_info.str();
  }
  if (auto err = read_address(authority, url))
    return err;
  if (!path.empty() && (path.getAsInteger(10, url.db) || url.db < 0 || url.db > 1 << 20))
    return bad_url(fmt::format("database '{}' is not a number", path.str()));
  llvm::SmallVector<llvm::StringRef, 8> parameters;
  query.split(parameters, '&', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef parameter : parameters) {
    auto [name, value] = parameter.split('=');
    if (auto err = read_parameter(name, value, url))
      return err;
  }
  return url;
}

std::string RemoteUrl::redacted() const {
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("redis://{}{}{}{}:{}/{}?connect_timeout_ms={}&op_timeout_ms={}&"
                     "backoff_ms={}&lock_ttl_ms={}&max_value_bytes={}&mode={}",
                     password.empty() ? "" : ":***@", v6 ? "[" : "", host, v6 ? "]" : "", port,
                     db, connect_timeout_ms, op_timeout_ms, backoff_ms, lock_ttl_ms,
                     max_value_bytes, read_only() ? "ro" : "rw");
}

} // namespace specjit
