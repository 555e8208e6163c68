// C1, C2 and C3 (RELIABILITY.md) at the engine level: damaged entries in a real cache of the
// test kernel. Each must be a miss before a byte reaches the driver, be moved aside and logged,
// be recompiled to exactly the reference bytes, and the next request (a fresh engine, as a
// new process would be) must hit the repaired entry. The entry-level halves (every bit of a
// sample entry, every truncation length) are in tests/cache/entry_format_test.cpp.
#include "reliability_support.h"

#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/test_kernel.h"

#include <random>
#include <sys/resource.h>

using namespace specjit;
using namespace specjit::reliability;
using runtime::Engine;

namespace {

struct Fixture {
  TempDir dir;
  Config config = test::config_in(dir);
  std::string reference[2]; // cubins of values 7 and 8
  Digest128 key[2];
  std::string path[2];
  std::string good[2]; // the published entries

  Fixture() {
    Engine engine(config);
    auto kernel = engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::exact()));
    REQUIRE(static_cast<bool>(kernel));
    cache::StoreOptions options;
    options.root = dir / "cache";
    cache::DiskStore store(options);
    for (int i = 0; i < 2; ++i) {
      auto variant = engine.prepare(*kernel, {128, 7 + i});
      REQUIRE(static_cast<bool>(variant));
      reference[i] = (*variant)->cubin;
      key[i] = (*variant)->key;
      path[i] = store.entry_path(key[i], "scale_tokens");
      good[i] = test::read_file(path[i]);
    }
  }

  struct Outcome {
    bool served = false, exact = false;
    runtime::EngineStats stats;
  };
  // A fresh engine (an empty memory tier) asks for value 7 + i.
  Outcome request(int i) {
    Engine engine(config);
    auto kernel = engine.add_kernel(runtime::scale_tokens_kernel(runtime::Policy::exact()));
    REQUIRE(static_cast<bool>(kernel));
    Outcome outcome;
    auto variant = engine.prepare(*kernel, {128, 7 + i});
    outcome.served = static_cast<bool>(variant);
    if (variant)
      outcome.exact = compare_compiles((*variant)->cubin, reference[i]) != Sameness::different;
    else
      llvm::consumeError(variant.takeError());
    outcome.stats = engine.stats();
    return outcome;
  }

  size_t quarantined() { return names_in(dir / "cache/v1/corrupt").size(); }

  // Writes `bytes` as entry i; expects a detected miss, a recompile and a hit afterwards.
  bool damaged_is_repaired(int i, const std::string& bytes) {
    test::write_file(path[i], bytes);
    size_t before = quarantined();
    Outcome first = request(i);
    bool ok = first.served && first.exact && first.stats.corrupt_entries == 1 &&
              first.stats.compiles == 1 && first.stats.disk_hits == 0 &&
              quarantined() == before + 1;
    Outcome next = request(i);
    ok = ok && next.served && next.exact && next.stats.disk_hits == 1 &&
         next.stats.compiles == 0;
    return ok;
  }
};

uint64_t read_u64(const std::string& bytes, size_t offset) {
  uint64_t value = 0;
  std::memcpy(&value, bytes.data() + offset, 8);
  return value;
}
void write_u64(std::string& bytes, size_t offset, uint64_t value) {
  std::memcpy(bytes.data() + offset, &value, 8);
}

} // namespace

TEST_CASE("C1: a bit flip anywhere in a real entry is detected, moved aside and recompiled") {
  Fixture f;
  const int store_trials = 1000, engine_trials = sized(24, 1000);
  const std::string& good = f.good[0];
  uint64_t cubin_size = read_u64(good, 32);
  // Regions: header fields, checksum, cubin, metadata; trials cycle through them.
  struct Region {
    const char* name;
    size_t begin, end;
  };
  std::vector<Region> regions = {{"header", 0, 48},
                                 {"checksum", 48, 64},
                                 {"cubin", 64, 64 + cubin_size},
                                 {"metadata", 64 + cubin_size, good.size()}};
  std::mt19937_64 rng(7);
  auto flipped = [&](int trial) {
    const Region& region = regions[trial % regions.size()];
    size_t offset = region.begin + rng() % (region.end - region.begin);
    std::string bytes = good;
    bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << (rng() % 8)));
    return bytes;
  };
  // Store level, in this process: 1000 flips, every one a miss that is moved aside.
  cache::StoreOptions options;
  options.root = f.dir / "cache";
  cache::DiskStore store(options);
  int64_t store_detected = 0;
  for (int trial = 0; trial < store_trials; ++trial) {
    test::write_file(f.path[0], flipped(trial));
    cache::LookupResult result = store.lookup(f.key[0], "scale_tokens");
    if (!result.hit && result.corrupt.size() == 1 && result.corrupt[0].moved_aside)
      ++store_detected;
  }
  CHECK(store_detected == store_trials);
  // Engine level: the miss is recompiled to the reference bytes and the next request hits.
  int64_t engine_repaired = 0;
  for (int trial = 0; trial < engine_trials; ++trial) {
    CAPTURE(trial);
    bool ok = f.damaged_is_repaired(0, flipped(trial));
    CHECK(ok);
    engine_repaired += ok;
  }
  figures("C1", {{"store_trials", num(int64_t{store_trials})},
                 {"store_detected", num(store_detected)},
                 {"engine_trials", num(int64_t{engine_trials})},
                 {"engine_detected_recompiled_rehit", num(engine_repaired)},
                 {"corrupt_loads", num(int64_t{engine_trials} - engine_repaired)}});
}

TEST_CASE("C2: an entry copied under another key's name is rejected") {
  Fixture f;
  bool ok = f.damaged_is_repaired(1, f.good[0]);
  CHECK(ok);
  figures("C2", {{"rejected_and_recompiled", num(int64_t{ok})}});
}

TEST_CASE("C3: truncations, bad magic, a future version and absurd lengths are misses") {
  Fixture f;
  const std::string& good = f.good[0];
  uint64_t cubin_size = read_u64(good, 32);
  std::vector<std::pair<std::string, std::string>> cases;
  for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{12}, size_t{16},
                        size_t{47}, size_t{63}, size_t{64}, size_t{65}, 64 + cubin_size / 2,
                        64 + cubin_size, good.size() - 1})
    cases.emplace_back("truncated to " + std::to_string(length), good.substr(0, length));
  cases.emplace_back("trailing byte", good + "x");
  std::string bad = good;
  bad[0] = 'X';
  cases.emplace_back("bad magic", bad);
  bad = good;
  bad[8] = 2; // format version 2
  cases.emplace_back("future format version", bad);
  for (size_t offset : {size_t{12}, size_t{32}, size_t{40}})
    for (uint64_t value : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 31}) {
      bad = good;
      if (offset == 12) {
        uint32_t header = static_cast<uint32_t>(value);
        std::memcpy(bad.data() + 12, &header, 4);
      } else {
        write_u64(bad, offset, value);
      }
      cases.emplace_back("absurd length at " + std::to_string(offset), bad);
    }
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  long rss_before_kb = usage.ru_maxrss;
  int64_t repaired = 0;
  for (const auto& [name, bytes] : cases) {
    CAPTURE(name);
    bool ok = f.damaged_is_repaired(0, bytes);
    CHECK(ok);
    repaired += ok;
  }
  getrusage(RUSAGE_SELF, &usage);
  long growth_mb = (usage.ru_maxrss - rss_before_kb) / 1024;
  CHECK(growth_mb < 256); // no allocation trusted a length field
  figures("C3", {{"cases", num(static_cast<int64_t>(cases.size()))},
                 {"misses_recompiled", num(repaired)},
                 {"max_rss_growth_mb", num(static_cast<int64_t>(growth_mb))}});
}
