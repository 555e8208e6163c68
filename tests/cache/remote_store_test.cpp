// The remote store and the fleet lock against a real redis-server on a loopback port.
#include "cache/remote_lock.h"
#include "cache/remote_store.h"
#include "cache/remote_value.h"

#include "cache_test_support.h"
#include "redis_server.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using namespace specjit;
using namespace specjit::cache;
using specjit::test::RedisServer;

namespace {

struct Watched {
  std::vector<RemoteTransition> changes;
  std::unique_ptr<RemoteStore> store;
};

Watched open(const std::string& url_text, const std::string& password = "") {
  auto url = parse_remote_url(url_text);
  REQUIRE(url);
  Watched watched;
  auto* changes = &watched.changes;
  watched.store = std::make_unique<RemoteStore>(
      *url, password, [changes](const RemoteTransition& change) { changes->push_back(change); });
  return watched;
}

double ms_of(const std::function<void()>& body) {
  auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

bool skipped(llvm::Error error) {
  bool result = false;
  llvm::handleAllErrors(std::move(error),
                        [&](const RemoteUnavailableError& e) { result = e.skipped(); });
  return result;
}

} // namespace

TEST_CASE("values go in and come back byte for byte, bounded by max_bytes") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  RedisServer server;
  REQUIRE(server.running());
  Watched remote = open(server.url());
  std::string bytes = cache::test::sample_entry().bytes + std::string("\0\x01\xff", 3);
  REQUIRE(remote.store->set("specjit:test:a", bytes, false).get());
  auto back = remote.store->get("specjit:test:a", 1 << 20);
  REQUIRE(back);
  REQUIRE(*back);
  CHECK(**back == bytes);
  auto bounded = remote.store->get("specjit:test:a", 10);
  REQUIRE(bounded);
  CHECK((*bounded)->size() == 11); // max_bytes + 1: recognisably oversized
  auto missing = remote.store->get("specjit:test:none", 1 << 20);
  REQUIRE(missing);
  CHECK(!*missing);
  auto again = remote.store->set("specjit:test:a", "other", /*only_if_absent=*/true);
  REQUIRE(again);
  CHECK(!*again);
  CHECK(remote.changes.empty());
}

TEST_CASE("an unreachable server costs the connect timeout once, then is skipped") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  int port = specjit::test::free_loopback_port(); // nothing listens there
  Watched remote = open("redis://127.0.0.1:" + std::to_string(port) +
                        "/0?connect_timeout_ms=100&backoff_ms=60000");
  double first = ms_of([&] { CHECK(!skipped(remote.store->get("x", 10).takeError())); });
  CHECK(first < 150);
  double second = ms_of([&] { CHECK(skipped(remote.store->get("x", 10).takeError())); });
  CHECK(second < 1);
  CHECK(remote.store->backing_off());
  REQUIRE(remote.changes.size() == 1);
  CHECK(!remote.changes[0].up);
  CHECK(remote.changes[0].detail.find("cannot connect") != std::string::npos);
}

TEST_CASE("a paused server costs at most the operation timeout, and comes back up") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  RedisServer server;
  Watched remote = open(server.url("op_timeout_ms=100&backoff_ms=200"));
  REQUIRE(remote.store->ping());
  server.cli({"CLIENT", "PAUSE", "600", "ALL"});
  double paused = ms_of([&] { CHECK(!remote.store->get("x", 10)); });
  CHECK(paused >= 90);
  CHECK(paused < 250);
  CHECK(ms_of([&] { CHECK(!remote.store->get("x", 10)); }) < 1); // backing off
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  CHECK(remote.store->get("x", 10));
  REQUIRE(remote.changes.size() == 2);
  CHECK(!remote.changes[0].up);
  CHECK(remote.changes[0].detail.find("no answer within 100 ms") != std::string::npos);
  CHECK(remote.changes[1].up);
}

TEST_CASE("a wrong or missing password is one clear failure, never shown") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  RedisServer server({"--requirepass", "right-password"});
  Watched wrong = open(server.url(), "wrong-password");
  auto failed = wrong.store->get("x", 10);
  REQUIRE(!failed);
  std::string message = llvm::toString(failed.takeError());
  CHECK(message.find("authenticating") != std::string::npos);
  CHECK(message.find("wrong-password") == std::string::npos);
  CHECK(wrong.changes.size() == 1);
  Watched none = open(server.url());
  auto refused = none.store->get("x", 10);
  REQUIRE(!refused);
  CHECK(llvm::toString(refused.takeError()).find("NOAUTH") != std::string::npos);
  Watched right = open(server.url(), "right-password");
  CHECK(right.store->set("x", "y", false));
}

TEST_CASE("the fleet lock has one holder, releases only by its token and expires") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  RedisServer server;
  Watched a = open(server.url("lock_ttl_ms=400")), b = open(server.url("lock_ttl_ms=400"));
  cache::test::SampleEntry entry = cache::test::sample_entry();
  FleetWait first = acquire_or_wait(*a.store, entry.key);
  CHECK(first.lock.held());
  CHECK(!first.contended);
  // b waits while a holds it; a publishes; b gets the value instead of the lock.
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(a.store->set(remote_entry_name(entry.key), remote_value_encode(entry.bytes, entry.key), false));
    first.lock.release();
  });
  FleetWait second = acquire_or_wait(*b.store, entry.key);
  publisher.join();
  CHECK(second.contended);
  CHECK(!second.lock.held());
  REQUIRE(second.value);
  CHECK(remote_value_decode(*second.value, entry.key, 1 << 20));
  // Another token cannot release a held lock; a holder that never releases costs the expiry.
  cache::test::SampleEntry other = cache::test::sample_entry("k", 9);
  FleetWait held = acquire_or_wait(*a.store, other.key);
  REQUIRE(held.lock.held());
  CHECK(!b.store->remove_if_equal(remote_lock_name(other.key), "not-the-token").get());
  double ms = 0;
  FleetWait after;
  ms = ms_of([&] { after = acquire_or_wait(*b.store, other.key); });
  CHECK(after.lock.held());
  CHECK(ms >= 300);
  CHECK(ms < 800);
}

TEST_CASE("a waiter gives the successor of a dead lock holder its own expiry") {
  if (!specjit::test::redis_or_skip("remote_store_test"))
    return;
  RedisServer server;
  Watched a = open(server.url("lock_ttl_ms=1000")), b = open(server.url("lock_ttl_ms=1000"));
  cache::test::SampleEntry entry = cache::test::sample_entry("successor", 3);
  const std::string lock = remote_lock_name(entry.key);
  // A holder that will never publish; at 300 ms the lock passes to one that publishes at
  // 1100 ms, after the first holder's expiry would have ended the wait (1000 ms).
  REQUIRE(a.store->set(lock, "dead-holder", true, 1000).get());
  std::thread successor([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(a.store->set(lock, "successor", false, 1000).get());
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    CHECK(a.store->set(remote_entry_name(entry.key),
                       remote_value_encode(entry.bytes, entry.key), false));
  });
  FleetWait waited;
  const double ms = ms_of([&] { waited = acquire_or_wait(*b.store, entry.key); });
  successor.join();
  CHECK(waited.contended);
  CHECK(!waited.lock.held());
  REQUIRE(waited.value);
  CHECK(remote_value_decode(*waited.value, entry.key, 1 << 20));
  CHECK(ms >= 1000); // past the dead holder's expiry
  CHECK(ms < 2500);
}
