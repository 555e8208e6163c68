#include "support/config.h"
#include "support/remote_url.h"

#include <doctest/doctest.h>

#include <map>

using namespace specjit;

TEST_CASE("a remote URL gives host, port, database and the defaults") {
  auto url = parse_remote_url("redis://cache.internal:6380/3");
  REQUIRE(url);
  CHECK(url->host == "cache.internal");
  CHECK(url->port == 6380);
  CHECK(url->db == 3);
  CHECK(url->connect_timeout_ms == 100);
  CHECK(url->op_timeout_ms == 500);
  CHECK(!url->read_only());
  auto bare = parse_remote_url("redis://localhost");
  REQUIRE(bare);
  CHECK(bare->port == 6379);
  CHECK(bare->db == 0);
}

TEST_CASE("a remote URL's parameters set timeouts, back-off, lock expiry and the mode") {
  auto url = parse_remote_url("redis://[::1]:7000/0?connect_timeout_ms=50&op_timeout_ms=20&"
                              "backoff_ms=0&lock_ttl_ms=1500&max_value_bytes=4M&mode=ro");
  REQUIRE(url);
  CHECK(url->host == "::1");
  CHECK(url->port == 7000);
  CHECK(url->connect_timeout_ms == 50);
  CHECK(url->op_timeout_ms == 20);
  CHECK(url->backoff_ms == 0);
  CHECK(url->lock_ttl_ms == 1500);
  CHECK(url->max_value_bytes == 4u << 20);
  CHECK(url->read_only());
}

TEST_CASE("the password is kept but never shown") {
  auto url = parse_remote_url("redis://:s3cret-pw@10.0.0.7:6379/1");
  REQUIRE(url);
  CHECK(url->password == "s3cret-pw");
  CHECK(url->redacted().find("s3cret-pw") == std::string::npos);
  CHECK(url->redacted().find(":***@10.0.0.7:6379/1") != std::string::npos);
  std::map<std::string, std::string> env = {{"SPECJIT_REMOTE", "redis://:s3cret-pw@h:1/0"}};
  auto config = Config::from_lookup([&](llvm::StringRef name) -> std::optional<std::string> {
    auto it = env.find(name.str());
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  REQUIRE(config);
  bool shown = false;
  for (const Config::Row& row : config->describe()) {
    CHECK(row.value.find("s3cret-pw") == std::string::npos);
    shown |= row.variable == "SPECJIT_REMOTE" && row.value.find("redis://:***@h:1/0") == 0;
  }
  CHECK(shown);
}

TEST_CASE("a malformed remote URL is an error naming what is wrong, never the password") {
  for (const char* text :
       {"http://h:1", "redis://", "redis://h:0", "redis://h:99999", "redis://h:1/x",
        "redis://h:1/0?op_timeout_ms=0", "redis://h:1/0?mode=rx", "redis://h:1/0?colour=red",
        "redis://user:pw-secret@h:1", "redis://h:1/0?connect_timeout_ms=99999999999999999"}) {
    auto url = parse_remote_url(text);
    REQUIRE_MESSAGE(!url, text);
    std::string message = llvm::toString(url.takeError());
    CHECK(message.find("remote URL") != std::string::npos);
    CHECK(message.find("pw-secret") == std::string::npos);
  }
  auto config = Config::from_lookup([](llvm::StringRef name) -> std::optional<std::string> {
    if (name == "SPECJIT_REMOTE")
      return std::string("redis://h:1/0?mode=rx");
    return std::nullopt;
  });
  REQUIRE(!config);
  CHECK(llvm::toString(config.takeError()).find("SPECJIT_REMOTE") != std::string::npos);
}
