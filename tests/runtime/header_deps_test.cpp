// Keys from what a compile read: a CCCL kernel compiled against the toolkit's header tree, the
// tree copied elsewhere, one byte of an included header changed, a header not included changed,
// and the stat hints that spare a fresh process the re-hashing: used when the tree is
// unchanged, ignored when damaged, not needed from a read-only layer, and never able to hide
// an edit that puts the mtime back (real NVRTC compiles, no GPU).
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/header_deps.h"

#include "cache/stat_hints.h"

#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

constexpr const char* k_reduce_text = R"(
#include <cub/block/block_reduce.cuh>
template <int BLOCK> __global__ void block_sum(const float* in, float* out, int n) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage storage;
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float sum = Reduce(storage).Sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";

KernelDef reduce_kernel(std::vector<std::string> include_dirs) {
  KernelDef def;
  def.id = "cub_block_sum";
  def.source = KernelSource::from_text("block_sum.cu", k_reduce_text);
  def.function = "block_sum";
  def.params = {ParamDef::user("block", Policy::exact())};
  def.include_dirs = std::move(include_dirs);
  return def;
}

// One fresh engine (a fresh process as far as the cache is concerned) prepares block=128.
const Variant* prepare_in_fresh_engine(const Config& config, const KernelDef& def,
                                       EngineStats& stats) {
  static std::vector<std::unique_ptr<Engine>> engines; // variants live as long as engines
  engines.push_back(std::make_unique<Engine>(config));
  Engine& engine = *engines.back();
  auto id = engine.add_kernel(def);
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  auto variant = engine.prepare(*id, {128});
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  stats = engine.stats();
  return *variant;
}

void copy_tree(const std::string& from, const std::string& to) {
  test::ProcessResult copy = test::run_process({"/bin/cp", "-rL", from, to});
  REQUIRE_MESSAGE(copy.exit_code == 0, copy.err);
}

// The one hint file of the root, or "" when there is none.
std::string hint_file(const std::string& root) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root + "/v1/hints", ec), end; it != end && !ec;
       it.increment(ec))
    return it->path();
  return "";
}

std::vector<std::string> toolkit_or_skip(const Config& config) {
  std::vector<std::string> toolkit = config.cuda_include_dirs();
  if (!llvm::sys::fs::exists(toolkit[0] + "/cub/block/block_reduce.cuh")) {
    MESSAGE("SKIPPED: no CCCL headers under " << toolkit[0]);
    return {};
  }
  return toolkit;
}

void append_byte(const std::string& path) {
  std::string text = test::read_file(path);
  test::write_file(path, text + "\n");
}

// The event log holds two compiles of `kernel`, the second because a header changed, and its
// diff names `header`.
void check_second_compile_names_header(const std::string& events, const char* kernel,
                                       const std::string& header) {
  auto compiles = test::events_named(test::read_json_lines(events), "compile", kernel);
  REQUIRE(compiles.size() == 2);
  CHECK(test::string_field(compiles.back(), "reason") == "header_changed");
  const llvm::json::Array* diff = compiles.back().getArray("diff");
  REQUIRE(diff != nullptr);
  bool named = false;
  for (const llvm::json::Value& row : *diff)
    if (const llvm::json::Object* object = row.getAsObject())
      named |= test::string_field(*object, "component") == "header" &&
               test::string_field(*object, "name") == header;
  CHECK(named);
}

} // namespace

TEST_CASE("a stored dependency set holds until one of its headers changes") {
  TempDir dir;
  REQUIRE(!llvm::sys::fs::create_directories(dir / "inc/sub"));
  REQUIRE(!llvm::sys::fs::create_directories(dir / "front"));
  test::write_file(dir / "inc/a.h", "#define A 1\n");
  test::write_file(dir / "inc/sub/b.h", "#define B 2\n");
  std::vector<std::string> dirs = {dir / "front", dir / "inc"};
  auto set = dependencies_of({dir / "inc/sub/../a.h", dir / "inc/sub/b.h"}, dirs);
  REQUIRE_MESSAGE(static_cast<bool>(set), llvm::toString(set.takeError()));
  REQUIRE(set->size() == 2);
  CHECK((*set)[0].name == "a.h");
  CHECK((*set)[1].name == "sub/b.h");
  CHECK_FALSE(check_dependency_set(*set, dirs).has_value());

  append_byte(dir / "inc/sub/b.h");
  std::optional<HeaderChange> change = check_dependency_set(*set, dirs);
  REQUIRE(change.has_value());
  CHECK(change->name == "sub/b.h");
  CHECK(change->cached == (*set)[1].digest.hex());

  // A header that an earlier include directory now shadows fails the set too, even when its
  // bytes are the same.
  test::write_file(dir / "front/a.h", "#define A 1\n");
  std::optional<HeaderChange> shadowed = check_dependency_set(*set, dirs);
  REQUIRE(shadowed.has_value());
  CHECK(shadowed->name == "a.h");
  CHECK(shadowed->requested == "(now found in include dir 0)");

  auto outside = dependencies_of({"/etc/hostname"}, dirs);
  REQUIRE_FALSE(static_cast<bool>(outside));
  CHECK(llvm::toString(outside.takeError()).find("/etc/hostname") != std::string::npos);
}

TEST_CASE("a CCCL kernel is keyed by the headers it read, never by their paths") {
  TempDir dir;
  Config config = test::config_in(dir);
  std::vector<std::string> toolkit = toolkit_or_skip(config);
  if (toolkit.empty())
    return;
  EngineStats stats;
  const Variant* original = prepare_in_fresh_engine(config, reduce_kernel(toolkit), stats);
  CHECK(stats.compiles == 1);
  CHECK(llvm::sys::fs::exists(dir / "cache/v1/deps"));
  const uint64_t headers = stats.headers_hashed;
  CHECK(headers > 10);

  // The toolkit's headers are old and unchanged: every digest comes from a stat hint.
  const Variant* hinted = prepare_in_fresh_engine(config, reduce_kernel(toolkit), stats);
  CHECK(stats.disk_hits == 1);
  CHECK(hinted->key == original->key);
  CHECK(stats.headers_from_hints == headers);
  CHECK(stats.headers_hashed == 0);

  // The same trees elsewhere: the stored set holds, the key is the same, nothing compiles.
  REQUIRE(!llvm::sys::fs::create_directories(dir / "copy"));
  copy_tree(toolkit[0], dir / "copy/cccl");
  copy_tree(toolkit[1], dir / "copy/include");
  std::vector<std::string> copies = {dir / "copy/cccl", dir / "copy/include"};
  const Variant* moved = prepare_in_fresh_engine(config, reduce_kernel(copies), stats);
  CHECK(stats.compiles == 0);
  CHECK(stats.disk_hits == 1);
  CHECK(moved->key == original->key);
  // New inodes: no hint applies, every header is hashed again.
  CHECK(stats.headers_hashed == headers);
  CHECK(stats.headers_from_hints == 0);

  // A header nothing includes: same key, no compile.
  append_byte(dir / "copy/cccl/cub/device/device_histogram.cuh");
  const Variant* unrelated = prepare_in_fresh_engine(config, reduce_kernel(copies), stats);
  CHECK(stats.compiles == 0);
  CHECK(unrelated->key == original->key);

  // One byte of an included header: a new key, and the log names the header.
  append_byte(dir / "copy/cccl/cub/block/block_reduce.cuh");
  const Variant* changed = prepare_in_fresh_engine(config, reduce_kernel(copies), stats);
  CHECK(stats.compiles == 1);
  CHECK(changed->key != original->key);
  check_second_compile_names_header(dir / "events.jsonl", "cub_block_sum",
                                    "cub/block/block_reduce.cuh");
}

TEST_CASE("a damaged or foreign hint file is ignored, then replaced") {
  TempDir dir;
  Config config = test::config_in(dir);
  std::vector<std::string> toolkit = toolkit_or_skip(config);
  if (toolkit.empty())
    return;
  EngineStats stats;
  const Variant* original = prepare_in_fresh_engine(config, reduce_kernel(toolkit), stats);
  const uint64_t headers = stats.headers_hashed;
  std::string hints = hint_file(dir / "cache");
  REQUIRE(!hints.empty());
  std::string good = test::read_file(hints);

  SUBCASE("garbage") { test::write_file(hints, "specjit-hints 1\n and then nothing useful"); }
  SUBCASE("truncated") { test::write_file(hints, good.substr(0, good.size() / 2)); }
  SUBCASE("another definition's") {
    auto decoded =
        cache::decode_stat_hints(good, *Digest128::from_hex(llvm::sys::path::stem(hints)));
    REQUIRE(static_cast<bool>(decoded));
    test::write_file(hints, cache::encode_stat_hints(hash128("another definition"), *decoded));
  }
  REQUIRE(::chmod(hints.c_str(), 0600) == 0);
  const Variant* again = prepare_in_fresh_engine(config, reduce_kernel(toolkit), stats);
  CHECK(stats.disk_hits == 1);
  CHECK(again->key == original->key);
  CHECK(stats.headers_hashed == headers);
  CHECK(stats.headers_from_hints == 0);

  // The check wrote good hints back.
  prepare_in_fresh_engine(config, reduce_kernel(toolkit), stats);
  CHECK(stats.headers_from_hints == headers);
  CHECK(stats.headers_hashed == 0);
}

TEST_CASE("a cache read from a read-only layer needs no hint file there, and gets none") {
  TempDir dir;
  Config base = test::config_in(dir, {{"SPECJIT_CACHE_DIR", dir / "base"}});
  std::vector<std::string> toolkit = toolkit_or_skip(base);
  if (toolkit.empty())
    return;
  EngineStats stats;
  const Variant* original = prepare_in_fresh_engine(base, reduce_kernel(toolkit), stats);
  const uint64_t headers = stats.headers_hashed;
  // An image layer is built elsewhere: its hints (if any) would describe another machine.
  REQUIRE(!llvm::sys::fs::remove_directories(dir / "base/v1/hints"));
  test::ProcessResult before =
      test::run_process({"/usr/bin/find", dir / "base", "-printf", "%p %s %T@ %m\\n"});

  SUBCASE("a root that cannot be written") {
    test::write_file(dir / "file", "x");
    Config layered = test::config_in(dir, {{"SPECJIT_CACHE_DIR", dir / "file/cache"},
                                           {"SPECJIT_CACHE_READONLY_DIRS", dir / "base"}});
    const Variant* hit = prepare_in_fresh_engine(layered, reduce_kernel(toolkit), stats);
    CHECK(stats.disk_hits == 1);
    CHECK(stats.compiles == 0);
    CHECK(hit->key == original->key);
    CHECK(stats.headers_hashed == headers);
  }
  SUBCASE("a writable root keeps the hints") {
    Config layered = test::config_in(
        dir, {{"SPECJIT_CACHE_DIR", dir / "root"}, {"SPECJIT_CACHE_READONLY_DIRS", dir / "base"}});
    const Variant* hit = prepare_in_fresh_engine(layered, reduce_kernel(toolkit), stats);
    CHECK(stats.disk_hits == 1);
    CHECK(hit->key == original->key);
    CHECK(stats.headers_hashed == headers);
    CHECK(!hint_file(dir / "root").empty());
    prepare_in_fresh_engine(layered, reduce_kernel(toolkit), stats);
    CHECK(stats.headers_from_hints == headers);
  }
  test::ProcessResult after =
      test::run_process({"/usr/bin/find", dir / "base", "-printf", "%p %s %T@ %m\\n"});
  CHECK(after.out == before.out);
  CHECK_FALSE(llvm::sys::fs::exists(dir / "base/v1/hints"));
}

TEST_CASE("an edit that keeps a header's size and puts its mtime back changes the key") {
  TempDir dir;
  Config config = test::config_in(dir);
  REQUIRE(!llvm::sys::fs::create_directories(dir / "inc/my"));
  const std::string header = dir / "inc/my/value.h";
  test::write_file(header, "#define VALUE 1\n");
  KernelDef def;
  def.id = "valued";
  def.source = KernelSource::from_text(
      "valued.cu", "#include <my/value.h>\n"
                   "template <int N> __global__ void valued(int* out) { *out = VALUE * N; }\n");
  def.function = "valued";
  def.params = {ParamDef::user("n", Policy::exact())};
  def.include_dirs = {dir / "inc"};
  // Hints are only recorded for files that have not changed in the last two seconds.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));

  EngineStats stats;
  const Variant* original = prepare_in_fresh_engine(config, def, stats);
  CHECK(stats.compiles == 1);
  const Variant* hinted = prepare_in_fresh_engine(config, def, stats);
  CHECK(stats.disk_hits == 1);
  CHECK(hinted->key == original->key);
  CHECK(stats.headers_from_hints == 1);
  CHECK(stats.headers_hashed == 0);

  struct stat before;
  REQUIRE(::stat(header.c_str(), &before) == 0);
  test::write_file(header, "#define VALUE 2\n");
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, header.c_str(), times, 0) == 0);
  struct stat after;
  REQUIRE(::stat(header.c_str(), &after) == 0);
  REQUIRE(after.st_size == before.st_size);
  REQUIRE(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  REQUIRE(after.st_mtim.tv_sec == before.st_mtim.tv_sec);

  const Variant* edited = prepare_in_fresh_engine(config, def, stats);
  CHECK(stats.compiles == 1);
  CHECK(edited->key != original->key);
  check_second_compile_names_header(dir / "events.jsonl", "valued", "my/value.h");
}
