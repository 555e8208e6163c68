// I1 and I2 (RELIABILITY.md): the disk key changes with every key input, and the same request
// gives the same key in every process whatever the environment's and the options' order.
// Process-level inputs (template value, option, arch, policy) go through the helper; inputs a
// process cannot change (a source or header byte, the NVRTC version, the policy and format
// versions) are changed on the key inputs of the real request, with the real source closure.
#include "reliability_support.h"

#include "cache/cache_key.h"
#include "jit/source_closure.h"

#include <set>

using namespace specjit;
using namespace specjit::reliability;

namespace {

std::string key_of(const TempDir& dir, std::vector<std::string> args,
                   std::vector<std::string> env = {}) {
  args.insert(args.begin(), "key");
  std::vector<std::string> full = {"SPECJIT_CACHE_DIR=" + (dir / "cache"), "SPECJIT_LOG=off"};
  if (std::none_of(env.begin(), env.end(),
                   [](const std::string& e) { return e.rfind("SPECJIT_ARCH=", 0) == 0; }))
    full.push_back("SPECJIT_ARCH=sm_90a");
  full.insert(full.end(), env.begin(), env.end());
  test::ProcessResult result =
      test::run_process([&] {
        std::vector<std::string> argv = {SPECJIT_TEST_HELPER};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
      }(), full);
  REQUIRE_MESSAGE(result.exit_code == 0, result.err);
  REQUIRE(result.out.size() == 33);
  return result.out.substr(0, 32);
}

} // namespace

TEST_CASE("I1: changing each key input in turn changes the key") {
  TempDir dir;
  std::vector<std::string> base = {"--policy", "exact", "--value", "5"};
  std::string reference = key_of(dir, base);
  std::vector<std::pair<std::string, std::string>> keys;
  keys.emplace_back("template value", key_of(dir, {"--policy", "exact", "--value", "6"}));
  keys.emplace_back("template value (cols)",
                    key_of(dir, {"--policy", "exact", "--value", "5", "--cols", "64"}));
  keys.emplace_back("option", key_of(dir, {"--policy", "exact", "--value", "5", "--options",
                                           "-DSPECJIT_RELIABILITY=1"}));
  keys.emplace_back("arch", key_of(dir, base, {"SPECJIT_ARCH=sm_80"}));
  keys.emplace_back("arch (arch-specific)", key_of(dir, base, {"SPECJIT_ARCH=sm_90"}));
  keys.emplace_back("policy", key_of(dir, {"--policy", "bucketed(pow2)", "--value", "5"}));

  // The request's real key inputs, rebuilt from its entry, changed one at a time.
  TempDir cache_dir;
  std::string root = cache_dir / "cache";
  run_helper({"prepare", "--policy", "exact", "--value", "5"},
             env_for(root, cache_dir / "events.jsonl"), cache_dir / "made");
  cache::StoreOptions options;
  options.root = root;
  std::vector<cache::ListedEntry> listed = cache::DiskStore(options).list();
  REQUIRE(listed.size() == 1);
  REQUIRE(listed[0].metadata);
  const cache::CacheKeyInputs inputs = listed[0].metadata->key_inputs;
  REQUIRE(cache::cache_key(inputs).hex() == reference);
  auto closure = jit::source_closure("test/scale_tokens.cu");
  REQUIRE(static_cast<bool>(closure));
  REQUIRE(closure->size() >= 2); // the source and at least one project header
  REQUIRE(jit::closure_digest(*closure) == inputs.source_digest);
  auto with_byte_changed = [&](size_t file, size_t offset) {
    std::vector<std::string> texts;
    std::vector<jit::EmbeddedFile> files = *closure;
    for (const jit::EmbeddedFile& f : files)
      texts.push_back(f.text.str());
    texts[file][offset % texts[file].size()] ^= 0x20;
    for (size_t i = 0; i < files.size(); ++i)
      files[i].text = texts[i];
    cache::CacheKeyInputs changed = inputs;
    changed.source_digest = jit::closure_digest(files);
    return cache::cache_key(changed).hex();
  };
  keys.emplace_back("source byte", with_byte_changed(0, 100));
  keys.emplace_back("header byte", with_byte_changed(1, 100));
  auto changed = [&](auto mutate) {
    cache::CacheKeyInputs copy = inputs;
    mutate(copy);
    return cache::cache_key(copy).hex();
  };
  keys.emplace_back("NVRTC version", changed([](auto& in) { in.nvrtc_version += ".1"; }));
  keys.emplace_back("policy version", changed([](auto& in) { in.policy_version += 1; }));
  keys.emplace_back("format version", changed([](auto& in) { in.format_version += 1; }));

  std::set<std::string> distinct = {reference};
  int64_t changed_count = 0;
  for (const auto& [input, key] : keys) {
    CAPTURE(input);
    CHECK(key != reference);
    changed_count += key != reference;
    distinct.insert(key);
  }
  CHECK(distinct.size() == keys.size() + 1); // pairwise distinct too
  figures("I1", {{"inputs_changed", num(static_cast<int64_t>(keys.size()))},
                 {"key_changed", num(changed_count)}});
}

TEST_CASE("I2: the same request in two processes gives the same key, whatever the order") {
  TempDir dir;
  std::vector<std::string> a_args = {"--policy", "exact", "--value", "5", "--options",
                                     "-DSPECJIT_A=1,-DSPECJIT_B=2,--restrict"};
  std::vector<std::string> b_args = {"--value", "5", "--options",
                                     "--restrict,-DSPECJIT_B=2,-DSPECJIT_A=1", "--policy", "exact"};
  std::string a = key_of(dir, a_args, {"UNRELATED=1", "SPECJIT_STORM_THRESHOLD=4", "LANG=C"});
  std::string b = key_of(dir, b_args,
                         {"LANG=en_US.UTF-8", "SPECJIT_STORM_THRESHOLD=100", "UNRELATED=2",
                          "SPECJIT_CACHE_DIR=" + (dir / "elsewhere"), "HOME=/nonexistent",
                          "TZ=Asia/Tokyo", "SPECJIT_LOCK_TIMEOUT_MS=1"});
  CHECK(a == b);
  figures("I2", {{"processes", "2"}, {"identical_keys", num(int64_t{a == b})}});
}
