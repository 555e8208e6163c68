#include "cache/cache_key.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <random>

using namespace specjit;
using namespace specjit::cache;

namespace {

// Built from scratch on every call, so two calls share no state: equal keys then mean the key
// depends only on the values (I2, stability).
CacheKeyInputs sample_inputs() {
  CacheKeyInputs inputs;
  inputs.kernel = "inv_rope_fp8_quant";
  inputs.source_digest = hash128("template <int N> __global__ void k() {}");
  inputs.name_expression = "inv_rope_fp8_quant<128, 64>";
  inputs.options = {"--std=c++17", "-DSPECJIT=1", "--use_fast_math", "-lineinfo"};
  inputs.nvrtc_version = "12.4";
  inputs.arch = Arch{9, 0, true};
  inputs.policy_version = 3;
  inputs.format_version = k_entry_format_version;
  return inputs;
}

struct Mutation {
  const char* component;
  std::function<void(CacheKeyInputs&)> apply;
};

std::vector<Mutation> single_mutations() {
  std::vector<Mutation> mutations = {
      {"kernel", [](CacheKeyInputs& in) { in.kernel = "fused_moe"; }},
      {"source_digest",
       [](CacheKeyInputs& in) {
         in.source_digest = hash128("template <int N> __global__ void k(){}");
       }},
      {"source_digest", [](CacheKeyInputs& in) { in.source_digest.low ^= 1; }},
      {"name_expression",
       [](CacheKeyInputs& in) { in.name_expression = "inv_rope_fp8_quant<128, 65>"; }},
      {"options", [](CacheKeyInputs& in) { in.options.push_back("-G"); }},
      {"options", [](CacheKeyInputs& in) { in.options.pop_back(); }},
      {"nvrtc_version", [](CacheKeyInputs& in) { in.nvrtc_version = "12.5"; }},
      {"arch", [](CacheKeyInputs& in) { in.arch.arch_specific = false; }},
      {"arch",
       [](CacheKeyInputs& in) {
         in.arch = Arch{8, 9, false};
       }},
      {"policy_version", [](CacheKeyInputs& in) { in.policy_version += 1; }},
      {"format_version", [](CacheKeyInputs& in) { in.format_version += 1; }},
  };
  // Every option changed in turn.
  for (size_t i = 0; i < sample_inputs().options.size(); ++i)
    mutations.push_back({"options", [i](CacheKeyInputs& in) { in.options[i] += "x"; }});
  return mutations;
}

} // namespace

TEST_CASE("the key is stable for independently built equal inputs") {
  CHECK(cache_key(sample_inputs()) == cache_key(sample_inputs()));
  CHECK(diff_components(sample_inputs(), sample_inputs()).empty());
}

TEST_CASE("changing any key component changes the key (I1) and the diff names exactly it") {
  const Digest128 base = cache_key(sample_inputs());
  for (const Mutation& mutation : single_mutations()) {
    CAPTURE(mutation.component);
    CacheKeyInputs changed = sample_inputs();
    mutation.apply(changed);
    CHECK(cache_key(changed) != base);
    std::vector<ComponentDiff> diffs = diff_components(sample_inputs(), changed);
    REQUIRE(diffs.size() == 1);
    CHECK(diffs[0].component == mutation.component);
    CHECK(diffs[0].cached != diffs[0].requested);
  }
}

TEST_CASE("all single mutations give pairwise distinct keys") {
  std::vector<Digest128> keys = {cache_key(sample_inputs())};
  for (const Mutation& mutation : single_mutations()) {
    CacheKeyInputs changed = sample_inputs();
    mutation.apply(changed);
    keys.push_back(cache_key(changed));
  }
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j)
      CHECK(keys[i] != keys[j]);
}

TEST_CASE("option order never changes the key (I2)") {
  const Digest128 base = cache_key(sample_inputs());
  CacheKeyInputs permuted = sample_inputs();
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(permuted.options.begin(), permuted.options.end(), rng);
    CHECK(cache_key(permuted) == base);
    CHECK(diff_components(sample_inputs(), permuted).empty());
  }
}

TEST_CASE("moving text between fields never collides") {
  CacheKeyInputs a = sample_inputs(), b = sample_inputs();
  a.options = {"-DA", "B"};
  b.options = {"-DAB"};
  CHECK(cache_key(a) != cache_key(b));
  a = sample_inputs();
  b = sample_inputs();
  a.kernel = "k";
  a.name_expression = "x<1>";
  b.kernel = "kx";
  b.name_expression = "<1>";
  CHECK(cache_key(a) != cache_key(b));
}

TEST_CASE("diff_components lists several changes in the documented order") {
  CacheKeyInputs changed = sample_inputs();
  changed.format_version += 1;
  changed.kernel = "other";
  changed.nvrtc_version = "13.0";
  std::vector<ComponentDiff> diffs = diff_components(sample_inputs(), changed);
  REQUIRE(diffs.size() == 3);
  CHECK(diffs[0].component == "kernel");
  CHECK(diffs[1].component == "nvrtc_version");
  CHECK(diffs[1].cached == "12.4");
  CHECK(diffs[1].requested == "13.0");
  CHECK(diffs[2].component == "format_version");
}

TEST_CASE("key inputs survive a JSON round trip and keep their key") {
  CacheKeyInputs inputs = sample_inputs();
  llvm::json::Object object = to_json(inputs);
  // Through text, as the entry metadata stores it.
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(object));
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  REQUIRE(static_cast<bool>(parsed));
  llvm::Expected<CacheKeyInputs> back = key_inputs_from_json(*parsed->getAsObject());
  REQUIRE(static_cast<bool>(back));
  CHECK(*back == inputs);
  CHECK(cache_key(*back) == cache_key(inputs));
}

TEST_CASE("malformed key JSON is an error naming the field") {
  llvm::json::Object object = to_json(sample_inputs());
  object.erase("nvrtc_version");
  llvm::Expected<CacheKeyInputs> missing = key_inputs_from_json(object);
  REQUIRE(!missing);
  ErrorSummary summary = summarize(missing.takeError());
  CHECK(summary.message.find("nvrtc_version") != std::string::npos);

  object = to_json(sample_inputs());
  object["source_digest"] = "not hex";
  llvm::Expected<CacheKeyInputs> bad_digest = key_inputs_from_json(object);
  REQUIRE(!bad_digest);
  llvm::consumeError(bad_digest.takeError());

  object = to_json(sample_inputs());
  object["policy_version"] = -1;
  llvm::Expected<CacheKeyInputs> bad_version = key_inputs_from_json(object);
  REQUIRE(!bad_version);
  llvm::consumeError(bad_version.takeError());
}
