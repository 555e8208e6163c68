// The fleet tier inside the engine, against a real redis-server: a remote hit is used at once
// and its local copy is written without waiting for the disk (cache::Durability::relaxed);
// the copy is complete once the engine is gone, and a torn copy is a miss fetched again.
#include "engine_fixture.h"
#include "redis_server.h"

#include "runtime/engine.h"
#include "runtime/store_config.h"
#include "runtime/test_kernel.h"

#include "cache/disk_store.h"
#include "cache/file_io.h"

#include <atomic>
#include <unistd.h>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

// The fsync calls of the cache made while it lives, counted through the file-system seam;
// `fault` may fail other calls.
class FsyncCounter {
public:
  explicit FsyncCounter(cache::FaultInjector fault = {}) {
    cache::set_fault_injector([this, fault](cache::IoOp op, llvm::StringRef path) {
      if (op == cache::IoOp::fsync)
        m_count.fetch_add(1);
      return fault ? fault(op, path) : 0;
    });
  }
  ~FsyncCounter() { cache::set_fault_injector(nullptr); }
  int count() const { return m_count.load(); }

private:
  std::atomic<int> m_count{0};
};

Config node_config(const TempDir& dir, const std::string& node, const std::string& url) {
  return test::config_in(dir, {{"SPECJIT_CACHE_DIR", dir / (node + "-cache")},
                               {"SPECJIT_LOG", dir / (node + ".jsonl")},
                               {"SPECJIT_REMOTE", url}});
}

struct Ready {
  Digest128 key;
  std::string kernel;
  std::string cubin;
  VariantSource source = VariantSource::memory;
  EngineStats stats;
  int fsyncs = 0;
};

// One engine, destroyed before this returns, makes scale_tokens<128, 7> ready.
Ready make_ready(const Config& config, cache::FaultInjector fault = {}) {
  Ready ready;
  FsyncCounter fsyncs(std::move(fault));
  {
    Engine engine(config);
    auto kernel = engine.add_kernel(scale_tokens_kernel(Policy::exact()));
    REQUIRE(static_cast<bool>(kernel));
    auto variant = engine.prepare(*kernel, {128, 7});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    ready = {(*variant)->key,    (*variant)->kernel_name, (*variant)->cubin,
             (*variant)->source, engine.stats(),          0};
  }
  ready.fsyncs = fsyncs.count();
  return ready;
}

// The root's entry of `ready`'s key, when it is there and verifies.
std::optional<std::string> local_cubin(const Config& config, const Ready& ready) {
  cache::DiskStore store(store_options(config));
  cache::LookupResult found = store.lookup(ready.key, ready.kernel);
  if (!found.hit)
    return std::nullopt;
  return found.hit->entry.cubin.str();
}

} // namespace

TEST_CASE("a remote hit waits for no fsync, and its local copy verifies once the engine is gone") {
  if (!test::redis_or_skip("remote_tier_test"))
    return;
  test::TestRedis redis(5);
  TempDir dir;
  Ready compiled = make_ready(node_config(dir, "builder", redis.url()));
  CHECK(compiled.source == VariantSource::compiled);
  CHECK(compiled.fsyncs >= 2); // the compile's publish stays durable: the file, its directory

  const Config fresh = node_config(dir, "fresh", redis.url());
  Ready fetched = make_ready(fresh);
  CHECK(fetched.source == VariantSource::remote);
  CHECK(fetched.stats.remote_hits == 1);
  CHECK(fetched.stats.compiles == 0);
  CHECK(fetched.stats.write_failures == 0);
  CHECK(fetched.fsyncs == 0);
  CHECK(fetched.key == compiled.key);
  CHECK(fetched.cubin == compiled.cubin);

  std::optional<std::string> copy = local_cubin(fresh, fetched);
  REQUIRE(copy.has_value());
  CHECK(*copy == compiled.cubin);
  cache::DiskStore store(store_options(fresh));
  CHECK(store.verify(/*repair=*/false).empty());
  // The next start of the node reads its own copy: no remote round trip.
  Ready again = make_ready(fresh);
  CHECK(again.source == VariantSource::disk);
  CHECK(again.stats.remote_hits == 0);
}

TEST_CASE("a torn or empty local copy of a remote entry is a miss, fetched again and repaired") {
  if (!test::redis_or_skip("remote_tier_test"))
    return;
  test::TestRedis redis(5);
  TempDir dir;
  Ready compiled = make_ready(node_config(dir, "builder", redis.url()));
  const Config node = node_config(dir, "node", redis.url());
  REQUIRE(make_ready(node).source == VariantSource::remote);
  cache::DiskStore store(store_options(node));
  const std::string path = store.entry_path(compiled.key, compiled.kernel);

  for (bool empty : {false, true}) {
    CAPTURE(empty);
    // What a crash can leave of a copy that was never synced: a prefix, or nothing.
    const off_t size = static_cast<off_t>(test::read_file(path).size());
    REQUIRE(::truncate(path.c_str(), empty ? 0 : size / 2) == 0);
    auto decoded = cache::decode_entry(test::read_file(path), compiled.key);
    REQUIRE(!decoded);
    llvm::consumeError(decoded.takeError());

    Ready repaired = make_ready(node);
    CHECK(repaired.source == VariantSource::remote);
    CHECK(repaired.stats.corrupt_entries == 1);
    CHECK(repaired.stats.disk_hits == 0);
    CHECK(repaired.stats.compiles == 0);
    CHECK(repaired.cubin == compiled.cubin);
    std::optional<std::string> copy = local_cubin(node, compiled);
    REQUIRE(copy.has_value());
    CHECK(*copy == compiled.cubin);
  }
  // Both torn copies were moved aside, never loaded; the log says so.
  auto corrupt = test::events_named(test::read_json_lines(dir / "node.jsonl"), "entry_corrupt");
  REQUIRE(corrupt.size() == 2);
  for (const llvm::json::Object& event : corrupt)
    CHECK(event.getBoolean("moved_aside") == true);
  CHECK(store.verify(/*repair=*/false).empty());
}

TEST_CASE("a local copy that cannot be written costs nothing but a write_failed event") {
  if (!test::redis_or_skip("remote_tier_test"))
    return;
  test::TestRedis redis(5);
  TempDir dir;
  Ready compiled = make_ready(node_config(dir, "builder", redis.url()));
  const Config node = node_config(dir, "full", redis.url());
  // A full disk under the root: every write of a temp file fails.
  Ready fetched = make_ready(node, [](cache::IoOp op, llvm::StringRef path) {
    return op == cache::IoOp::write && path.endswith(".tmp") ? ENOSPC : 0;
  });
  CHECK(fetched.source == VariantSource::remote);
  CHECK(fetched.cubin == compiled.cubin);
  CHECK(!local_cubin(node, compiled).has_value());
  auto failed = test::events_named(test::read_json_lines(dir / "full.jsonl"), "write_failed");
  REQUIRE(failed.size() == 1);
  CHECK(test::string_field(failed[0], "key") == compiled.key.hex());
  CHECK(test::string_field(failed[0], "path") ==
        cache::DiskStore(store_options(node)).entry_path(compiled.key, compiled.kernel));
  CHECK(test::string_field(failed[0], "detail").find("No space left") != std::string::npos);
}
