// EngineStats' compile-lock counters: a request that finds its key's lock held by another
// process (here another open of the lock file, which flock treats as one) counts one wait when
// the holder publishes the key meanwhile or the take times out; an uncontended take counts none.
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/store_config.h"
#include "runtime/test_kernel.h"

#include <llvm/Support/MemoryBuffer.h>

#include <chrono>
#include <thread>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

struct Compiled {
  Digest128 key;
  std::string kernel;
  std::string entry_bytes; // the published entry, to publish again under another root
};

// Compiles scale_tokens' variant alone in `config`'s root.
Compiled compile_alone(const Config& config) {
  Engine engine(config);
  auto kernel = engine.add_kernel(scale_tokens_kernel());
  REQUIRE(static_cast<bool>(kernel));
  auto variant = engine.prepare(*kernel, {128, 1});
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  CHECK(engine.stats().lock_waits == 0); // nobody else held the lock
  cache::DiskStore store(store_options(config));
  auto bytes =
      llvm::MemoryBuffer::getFile(store.entry_path((*variant)->key, (*variant)->kernel_name));
  REQUIRE(static_cast<bool>(bytes));
  return {(*variant)->key, (*variant)->kernel_name, (*bytes)->getBuffer().str()};
}

// Requests the variant while `holder` holds its lock for `hold`; with `publish`, the holder
// publishes the entry before it lets go, as a process that compiled it would.
EngineStats request_under_held_lock(const Config& config, const Compiled& compiled,
                                    std::chrono::milliseconds hold, bool publish) {
  cache::DiskStore holder(store_options(config));
  auto lock = std::make_unique<cache::CompileLock>(holder.lock_for_compile(compiled.key));
  REQUIRE(lock->acquired());
  Engine engine(config);
  auto kernel = engine.add_kernel(scale_tokens_kernel());
  REQUIRE(static_cast<bool>(kernel));
  bool published = false;
  std::thread release([&] {
    std::this_thread::sleep_for(hold);
    if (publish)
      published =
          !llvm::errorToBool(holder.publish(compiled.key, compiled.kernel, compiled.entry_bytes));
    lock.reset();
  });
  auto variant = engine.prepare(*kernel, {128, 1});
  release.join();
  CHECK(published == publish);
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  CHECK((*variant)->key == compiled.key);
  return engine.stats();
}

} // namespace

TEST_CASE("a compile lock held while another process publishes the key counts one wait") {
  TempDir first_dir, dir;
  const Compiled compiled = compile_alone(test::config_in(first_dir));
  const EngineStats stats =
      request_under_held_lock(test::config_in(dir), compiled, std::chrono::milliseconds(200), true);
  CHECK(stats.lock_waits == 1);
  CHECK(stats.disk_hits == 1); // read what the holder published
  CHECK(stats.compiles == 0);
  CHECK(stats.lock_wait_ms_max >= 150);
  CHECK(stats.lock_wait_ms_max < 5000);
  CHECK(stats.lock_wait_ms_total >= stats.lock_wait_ms_max);
}

TEST_CASE("a compile lock take that times out counts one wait, then compiles") {
  TempDir first_dir, dir;
  const Compiled compiled = compile_alone(test::config_in(first_dir));
  const Config config = test::config_in(dir, {{"SPECJIT_LOCK_TIMEOUT_MS", "100"}});
  const EngineStats stats =
      request_under_held_lock(config, compiled, std::chrono::milliseconds(600), false);
  CHECK(stats.lock_waits == 1);
  CHECK(stats.compiles == 1);
  CHECK(stats.lock_wait_ms_max >= 90);
  CHECK(stats.lock_wait_ms_max < 550); // gave up at the timeout, not when the holder let go
}
