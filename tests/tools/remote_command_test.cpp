// specjit remote and precompile --push against a real Redis (docs/cli.md, docs/fleet.md).
#include "cli_test_support.h"
#include "redis_server.h"

#include "cache/remote_store.h"
#include "cache/remote_value.h"

using namespace specjit;
using namespace specjit::test;

TEST_CASE("without a reachable remote, specjit remote says so once and exits non-zero") {
  Cli cli;
  ProcessResult none = cli.run({"remote", "ping"});
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("no remote is configured") != std::string::npos);
  std::string dead = "SPECJIT_REMOTE=redis://:hunter2@127.0.0.1:" +
                     std::to_string(free_loopback_port()) + "/0?connect_timeout_ms=100";
  ProcessResult down = cli.run({"remote", "ping"}, {dead});
  CHECK(down.exit_code == 1);
  CHECK(down.err.find("cannot connect") != std::string::npos);
  CHECK(down.err.find("hunter2") == std::string::npos);
  ProcessResult config = cli.run({"config"}, {dead});
  CHECK(config.out.find("redis://:***@127.0.0.1") != std::string::npos);
  CHECK(config.out.find("hunter2") == std::string::npos);
  ProcessResult bad = cli.run({"remote", "frobnicate"}, {dead});
  CHECK(bad.exit_code == 2);
}

TEST_CASE("precompile --push fills the remote; ls, verify, pull and --repair see it") {
  if (!redis_or_skip("remote_command_test"))
    return;
  TestRedis redis(4);
  Cli cli;
  std::string remote = "SPECJIT_REMOTE=" + redis.url();
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3]"));
  ProcessResult ro = cli.run({"precompile", "--manifest", manifest, "--push"},
                             {"SPECJIT_REMOTE=" + redis.url("mode=ro")});
  CHECK(ro.exit_code == 2);
  CHECK(ro.err.find("read-only") != std::string::npos);
  llvm::json::Object pre = cli.json({"precompile", "--manifest", manifest, "--push"}, 0, {remote});
  CHECK(field(pre, "compiled") == 3);
  CHECK(field(cli.json({"remote", "push"}, 0, {remote}), "present") == 3);
  llvm::json::Object listing = cli.json({"remote", "ls"}, 0, {remote});
  CHECK(listing.getArray("entries")->size() == 3);
  CHECK(field(cli.json({"remote", "stats"}, 0, {remote}), "entries") == 3);
  CHECK(cli.json({"remote", "verify"}, 0, {remote}).getArray("bad")->empty());
  llvm::json::Object pulled =
      cli.json({"remote", "pull", "--cache-dir", cli.path("other")}, 0, {remote});
  CHECK(field(pulled, "pulled") == 3);
  CHECK(cli.keys(cli.path("other")) == cli.keys(cli.cache()));
  // A value flipped in Redis: verify finds it (exit 1), --repair removes it.
  auto url = parse_remote_url(redis.url());
  REQUIRE(url);
  cache::RemoteStore store(*url, "");
  std::vector<std::string> names = store.scan(cache::remote_entry_pattern(), 10).get();
  REQUIRE(names.size() == 3);
  std::string value = **store.get(names[0], 1 << 30);
  value[value.size() / 2] ^= 1;
  REQUIRE(store.set(names[0], value, false).get());
  CHECK(cli.json({"remote", "verify"}, 1, {remote}).getArray("bad")->size() == 1);
  CHECK(field(cli.json({"remote", "verify", "--repair"}, 1, {remote}), "removed") == 1);
  CHECK(cli.json({"remote", "verify"}, 0, {remote}).getArray("bad")->empty());
  CHECK(field(cli.json({"remote", "push"}, 0, {remote}), "pushed") == 1);
}
