// The engine end to end without a GPU: real NVRTC compiles of the test kernel, a real disk
// cache in a temporary directory, the recompilation log read back as JSON.
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/test_kernel.h"

#include "support/error.h"

#include <llvm/Support/FileSystem.h>

#include <atomic>
#include <sys/stat.h>
#include <thread>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

const Variant& prepare_ok(Engine& engine, KernelId kernel, std::vector<int64_t> values) {
  auto variant = engine.prepare(kernel, values);
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  return **variant;
}

KernelId add(Engine& engine, const KernelDef& def) {
  auto id = engine.add_kernel(def);
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  return *id;
}

std::vector<std::string> entry_files(const std::string& root) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".sjc"))
      files.push_back(it->path());
  return files;
}

} // namespace

TEST_CASE("a variant compiles once, then hits memory, then hits disk in a new engine") {
  TempDir dir;
  Config config = test::config_in(dir);
  Digest128 key;
  {
    Engine engine(config);
    KernelId kernel = add(engine, scale_tokens_kernel());
    const Variant& first = prepare_ok(engine, kernel, {128, 7});
    CHECK(first.source == VariantSource::compiled);
    CHECK(llvm::StringRef(first.cubin).startswith("\x7f" "ELF"));
    CHECK(!first.lowered_name.empty());
    const Variant& second = prepare_ok(engine, kernel, {128, 9});
    CHECK(&first == &second); // dynamic: the same variant
    key = first.key;
    EngineStats stats = engine.stats();
    CHECK(stats.compiles == 1);
    CHECK(stats.memory_hits == 1);
  }
  Engine engine(config);
  KernelId kernel = add(engine, scale_tokens_kernel());
  const Variant& loaded = prepare_ok(engine, kernel, {128, 4096});
  CHECK(loaded.source == VariantSource::disk);
  CHECK(loaded.key == key);
  CHECK(engine.stats().disk_hits == 1);
  CHECK(engine.stats().compiles == 0);
}

TEST_CASE("1000 distinct num_tokens under dynamic compile once; a second process compiles none") {
  TempDir dir;
  std::vector<std::string> env = {"SPECJIT_CACHE_DIR=" + (dir / "cache"),
                                  "SPECJIT_LOG=" + (dir / "events.jsonl"), "SPECJIT_ARCH=sm_90a",
                                  "SPECJIT_STRICT="};
  std::vector<std::string> argv = {SPECJIT_TEST_HELPER, "prepare", "--policy", "dynamic",
                                   "--first", "1", "--last", "1000"};
  test::ProcessResult first = test::run_process(argv, env);
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  test::ProcessResult second = test::run_process(argv, env);
  REQUIRE_MESSAGE(second.exit_code == 0, second.err);

  auto events = test::read_json_lines(dir / "events.jsonl");
  auto compiles = test::events_named(events, "compile", "scale_tokens");
  auto disk_hits = test::events_named(events, "disk_hit", "scale_tokens");
  REQUIRE(compiles.size() == 1);
  REQUIRE(disk_hits.size() == 1);
  CHECK(test::string_field(compiles[0], "reason") == "first_use");
  // Memory hits are counted, never logged: 2 processes x 1000 requests gave two lines.
  CHECK(events.size() == 2);
  // The pids tell the processes apart: the compile came from the first, the hit from the second.
  CHECK(test::int_field(compiles[0], "pid") != test::int_field(disk_hits[0], "pid"));
  auto stats = llvm::json::parse(second.out);
  REQUIRE(static_cast<bool>(stats));
  CHECK(test::int_field(*stats->getAsObject(), "compiles") == 0);
  CHECK(test::int_field(*stats->getAsObject(), "disk_hits") == 1);
  CHECK(test::int_field(*stats->getAsObject(), "memory_hits") == 999);
}

TEST_CASE("every log event carries the common fields of the schema") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  prepare_ok(engine, kernel, {128, 3});
  prepare_ok(engine, kernel, {128, 4});
  auto events = test::read_json_lines(dir / "events.jsonl");
  REQUIRE(events.size() == 2);
  for (const llvm::json::Object& event : events) {
    CHECK(test::int_field(event, "v") == 1);
    CHECK(event.getString("ts").hasValue());
    CHECK(event.getString("ts")->endswith("Z"));
    CHECK(test::int_field(event, "pid") > 0);
    CHECK(test::string_field(event, "kernel") == "scale_tokens");
    CHECK(event.getObject("variant") != nullptr);
    CHECK(event.getString("key")->size() == 32);
    CHECK(event.getNumber("ms").hasValue());
    CHECK(test::string_field(event, "arch") == "sm_90a");
    CHECK(test::string_field(event, "phase") == "warmup");
  }
  // The second compile is explained against the first: only num_tokens differs.
  CHECK(test::string_field(events[1], "reason") == "new_variant");
  const llvm::json::Array* diff = events[1].getArray("diff");
  REQUIRE(diff != nullptr);
  REQUIRE(diff->size() == 1);
  const llvm::json::Object* d = (*diff)[0].getAsObject();
  CHECK(test::string_field(*d, "component") == "num_tokens");
  CHECK(test::string_field(*d, "cached") == "3");
  CHECK(test::string_field(*d, "requested") == "4");
  CHECK(test::string_field(*d, "policy") == "exact");
  CHECK(test::int_field(*events[1].getObject("variant"), "num_tokens") == 4);
}

TEST_CASE("an exact parameter fed 20 values raises one storm event naming it") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  for (int64_t t = 1; t <= 20; ++t)
    prepare_ok(engine, kernel, {128, t});
  auto events = test::read_json_lines(dir / "events.jsonl");
  auto storms = test::events_named(events, "storm", "scale_tokens");
  REQUIRE(storms.size() == 1);
  CHECK(test::string_field(storms[0], "param") == "num_tokens");
  CHECK(test::int_field(storms[0], "distinct_values") == 9); // first value past the threshold of 8
  CHECK(test::events_named(events, "compile").size() == 20);
  CHECK(engine.stats().storms == 1);
}

TEST_CASE("a process that only loads exact variants from disk raises no storm") {
  TempDir dir;
  Config config = test::config_in(dir);
  {
    Engine engine(config);
    KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
    for (int64_t t = 1; t <= 12; ++t)
      prepare_ok(engine, kernel, {128, t});
    CHECK(engine.stats().storms == 1);
  }
  Engine reader(config);
  KernelId kernel = add(reader, scale_tokens_kernel(Policy::exact()));
  for (int64_t t = 1; t <= 12; ++t)
    prepare_ok(reader, kernel, {128, t});
  CHECK(reader.stats().disk_hits == 12);
  CHECK(reader.stats().compiles == 0);
  CHECK(reader.stats().storms == 0);
  auto events = test::read_json_lines(dir / "events.jsonl");
  CHECK(test::events_named(events, "storm", "scale_tokens").size() == 1); // the compiling one's
}

TEST_CASE("a flipped byte and a truncated entry are misses: moved aside, logged, recompiled") {
  TempDir dir;
  Config config = test::config_in(dir);
  {
    Engine engine(config);
    KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
    prepare_ok(engine, kernel, {128, 1});
    prepare_ok(engine, kernel, {128, 2});
  }
  std::vector<std::string> files = entry_files(dir / "cache");
  REQUIRE(files.size() == 2);
  std::string flipped = test::read_file(files[0]);
  flipped[flipped.size() / 2] ^= 0x10;
  test::write_file(files[0], flipped);
  std::string truncated = test::read_file(files[1]);
  test::write_file(files[1], truncated.substr(0, truncated.size() / 3));

  Engine engine(config);
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  prepare_ok(engine, kernel, {128, 1});
  prepare_ok(engine, kernel, {128, 2});
  EngineStats stats = engine.stats();
  CHECK(stats.corrupt_entries == 2);
  CHECK(stats.compiles == 2);
  CHECK(stats.disk_hits == 0);
  auto events = test::read_json_lines(dir / "events.jsonl");
  CHECK(test::events_named(events, "entry_corrupt").size() == 2);
  auto compiles = test::events_named(events, "compile");
  REQUIRE(compiles.size() == 4);
  CHECK(test::string_field(compiles[2], "reason") == "corrupt_entry");
  CHECK(test::string_field(compiles[3], "reason") == "corrupt_entry");
  // The bad files went to corrupt/, fresh entries replaced them, and the next engine hits.
  Engine third(config);
  KernelId again = add(third, scale_tokens_kernel(Policy::exact()));
  prepare_ok(third, again, {128, 1});
  prepare_ok(third, again, {128, 2});
  CHECK(third.stats().disk_hits == 2);
  CHECK(third.stats().compiles == 0);
}

TEST_CASE("an unwritable cache root degrades to memory and every request is still served") {
  TempDir dir;
  test::write_file(dir / "file", "not a directory");
  // A root below a regular file can never be created, even by root (ENOTDIR).
  Config config = test::make_config({{"SPECJIT_CACHE_DIR", dir / "file/cache"},
                                     {"SPECJIT_LOG", dir / "events.jsonl"},
                                     {"SPECJIT_ARCH", "sm_90a"}});
  for (int round = 0; round < 2; ++round) {
    Engine engine(config);
    CHECK_FALSE(engine.disk_writable());
    CHECK(!engine.disk_unusable_reason().empty());
    KernelId kernel = add(engine, scale_tokens_kernel());
    prepare_ok(engine, kernel, {128, 5});
    prepare_ok(engine, kernel, {128, 6});
    CHECK(engine.stats().compiles == 1);
    CHECK(engine.stats().memory_hits == 1);
  }
}

TEST_CASE("a read-only base layer is read and never written") {
  TempDir dir;
  Config base_config = test::config_in(dir, {{"SPECJIT_CACHE_DIR", dir / "base"}});
  {
    Engine engine(base_config);
    KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
    prepare_ok(engine, kernel, {128, 1});
  }
  std::vector<std::string> before = entry_files(dir / "base");
  REQUIRE(before.size() == 1);
  struct stat base_stat_before {};
  REQUIRE(::stat(before[0].c_str(), &base_stat_before) == 0);
  test::ProcessResult listing_before = test::run_process({"/usr/bin/find", dir / "base", "-printf", "%p %s %T@ %m\\n"});

  Config layered = test::config_in(
      dir, {{"SPECJIT_CACHE_DIR", dir / "root"}, {"SPECJIT_CACHE_READONLY_DIRS", dir / "base"}});
  Engine engine(layered);
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  const Variant& hit = prepare_ok(engine, kernel, {128, 1});
  CHECK(hit.source == VariantSource::disk);
  prepare_ok(engine, kernel, {128, 2}); // a miss: compiled into the writable root
  CHECK(engine.stats().disk_hits == 1);
  CHECK(engine.stats().compiles == 1);
  CHECK(entry_files(dir / "root").size() == 1);

  struct stat base_stat_after {};
  REQUIRE(::stat(before[0].c_str(), &base_stat_after) == 0);
  CHECK(base_stat_after.st_mtim.tv_sec == base_stat_before.st_mtim.tv_sec);
  CHECK(base_stat_after.st_mtim.tv_nsec == base_stat_before.st_mtim.tv_nsec);
  test::ProcessResult listing_after = test::run_process({"/usr/bin/find", dir / "base", "-printf", "%p %s %T@ %m\\n"});
  CHECK(listing_after.out == listing_before.out);
}

TEST_CASE("strict mode: after seal() a compile fails the call, naming kernel and variant") {
  TempDir dir;
  Engine engine(test::config_in(dir, {{"SPECJIT_STRICT", "error"}}));
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  CHECK(engine.sealed()); // SPECJIT_STRICT seals from the start
  auto refused = engine.prepare(kernel, {128, 62});
  REQUIRE_FALSE(static_cast<bool>(refused));
  ErrorSummary summary = summarize(refused.takeError());
  CHECK(summary.message.find("scale_tokens") != std::string::npos);
  CHECK(summary.message.find("1000000000062") != std::string::npos);
  auto events = test::read_json_lines(dir / "events.jsonl");
  CHECK(test::events_named(events, "compile").empty());
  CHECK(test::events_named(events, "compile_failed").size() == 1);
}

TEST_CASE("strict mode: variants compiled before seal() are served after it") {
  TempDir dir;
  Config warmup = test::config_in(dir);
  Engine engine(warmup);
  KernelId kernel = add(engine, scale_tokens_kernel(Policy::exact()));
  prepare_ok(engine, kernel, {128, 1});
  engine.seal();
  prepare_ok(engine, kernel, {128, 1}); // memory hit: fine
  auto events = test::read_json_lines(dir / "events.jsonl");
  CHECK(test::string_field(test::events_named(events, "compile")[0], "phase") == "warmup");
  // Sealed without SPECJIT_STRICT=error: a compile is allowed but logged as serving.
  prepare_ok(engine, kernel, {128, 2});
  events = test::read_json_lines(dir / "events.jsonl");
  CHECK(test::string_field(test::events_named(events, "compile")[1], "phase") == "serving");
  // A new process with SPECJIT_STRICT=error is served from disk for what was warmed up.
  Engine strict(test::config_in(dir, {{"SPECJIT_STRICT", "error"}}));
  KernelId again = add(strict, scale_tokens_kernel(Policy::exact()));
  prepare_ok(strict, again, {128, 1});
  auto refused = strict.prepare(again, {128, 3});
  CHECK_FALSE(static_cast<bool>(refused));
  llvm::consumeError(refused.takeError());
}

TEST_CASE("keys are identical across processes whatever the environment's order") {
  TempDir dir;
  std::vector<std::string> argv = {SPECJIT_TEST_HELPER, "key", "--policy", "exact", "--value",
                                   "62"};
  test::ProcessResult a = test::run_process(
      argv, {"SPECJIT_CACHE_DIR=" + (dir / "a"), "SPECJIT_LOG=off", "SPECJIT_ARCH=sm_90a",
             "UNRELATED=1"});
  test::ProcessResult b = test::run_process(
      argv, {"UNRELATED=2", "SPECJIT_ARCH=sm_90a", "SPECJIT_LOG=off",
             "SPECJIT_CACHE_DIR=" + (dir / "elsewhere/b"), "HOME=/nonexistent"});
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  CHECK(a.out.size() == 33);
  CHECK(a.out == b.out); // the cache path is not part of the key
  test::ProcessResult other = test::run_process(
      {SPECJIT_TEST_HELPER, "key", "--policy", "exact", "--value", "63"},
      {"SPECJIT_CACHE_DIR=" + (dir / "a"), "SPECJIT_LOG=off", "SPECJIT_ARCH=sm_90a"});
  CHECK(other.out != a.out);
}

TEST_CASE("option order in a kernel definition does not change the key") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef one = scale_tokens_kernel(Policy::exact());
  one.options = {"-DSPECJIT_A=1", "-DSPECJIT_B=2"};
  KernelDef two = one;
  two.options = {"-DSPECJIT_B=2", "-DSPECJIT_A=1"};
  const Variant& a = prepare_ok(engine, add(engine, one), {128, 5});
  const Variant& b = prepare_ok(engine, add(engine, two), {128, 5});
  CHECK(a.key == b.key);
  KernelDef three = one;
  three.options = {"-DSPECJIT_A=1", "-DSPECJIT_B=3"};
  CHECK(prepare_ok(engine, add(engine, three), {128, 5}).key != a.key);
}

TEST_CASE("concurrent requests for one new variant compile it once") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelId kernel = add(engine, scale_tokens_kernel());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i)
        if (!engine.prepare(kernel, {128, t * 100 + i}))
          ++failures;
    });
  for (auto& thread : threads)
    thread.join();
  EngineStats stats = engine.stats();
  CHECK(failures == 0);
  CHECK(stats.compiles == 1);
  CHECK(stats.requests == 800);
  CHECK(stats.requests == stats.memory_hits + stats.disk_hits + stats.compiles + stats.failures);
}

TEST_CASE("bad requests are clear errors and change nothing") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelId kernel = add(engine, scale_tokens_kernel());
  auto wrong_count = engine.prepare(kernel, {128});
  REQUIRE_FALSE(static_cast<bool>(wrong_count));
  CHECK(llvm::toString(wrong_count.takeError()).find("takes 2 template values") !=
        std::string::npos);
  KernelDef bad = scale_tokens_kernel();
  bad.params[1].encoding = ParamEncoding::raw; // raw needs exact or bucketed
  auto rejected = engine.add_kernel(bad);
  REQUIRE_FALSE(static_cast<bool>(rejected));
  CHECK(llvm::toString(rejected.takeError()).find("num_tokens") != std::string::npos);
  KernelDef missing = scale_tokens_kernel();
  missing.id = "missing";
  missing.source = "no/such/file.cu";
  auto not_found = engine.add_kernel(missing);
  REQUIRE_FALSE(static_cast<bool>(not_found));
  CHECK(llvm::toString(not_found.takeError()).find("no/such/file.cu") != std::string::npos);
  CHECK(entry_files(dir / "cache").empty());
}
