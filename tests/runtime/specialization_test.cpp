#include "runtime/specialization.h"

#include <doctest/doctest.h>

using namespace specjit::runtime;

namespace {
SpecValue spec(const Policy& policy, int64_t value) {
  auto result = specialize(policy, value);
  REQUIRE(static_cast<bool>(result));
  return *result;
}
} // namespace

TEST_CASE("the dynamic policy maps every value to one variant") {
  for (int64_t value : {0, 1, 17, 62, 8192, 999999})
    CHECK(spec(Policy::dynamic(), value) == SpecValue{SpecKind::dynamic, 0});
}

TEST_CASE("the exact policy maps each value to its own variant") {
  CHECK(spec(Policy::exact(), 62) == SpecValue{SpecKind::exact, 62});
  CHECK(spec(Policy::exact(), 63) == SpecValue{SpecKind::exact, 63});
  CHECK(spec(Policy::exact(), 62).word() == 1'000'000'000'062);
}

TEST_CASE("the bucketed policy maps a value to the smallest bucket that holds it") {
  CHECK(spec(Policy::bucketed_pow2(), 1).argument == 1);
  CHECK(spec(Policy::bucketed_pow2(), 3).argument == 4);
  CHECK(spec(Policy::bucketed_pow2(), 64).argument == 64);
  CHECK(spec(Policy::bucketed_pow2(), 65).argument == 128);
  Policy list = Policy::bucketed({16, 64, 256});
  CHECK(spec(list, 1) == SpecValue{SpecKind::bucketed, 16});
  CHECK(spec(list, 16).argument == 16);
  CHECK(spec(list, 17).argument == 64);
  CHECK(spec(list, 200).argument == 256);
  CHECK(spec(list, 256).argument == 256);
}

TEST_CASE("a value above the last bucket is an error naming the value and the last bound") {
  auto above = specialize(Policy::bucketed({16, 64, 256}), 100000);
  REQUIRE_FALSE(static_cast<bool>(above));
  CHECK(llvm::toString(above.takeError()) ==
        "value 100000 is above the last bucket bound 256 of policy bucketed(16,64,256); declare "
        "an overflow bucket (bucketed(16,64,256,+inf)) or a larger bound");
}

TEST_CASE("a declared overflow bucket holds every larger value with a true upper bound") {
  auto policy = Policy::parse("bucketed(16,64,256,+inf)");
  REQUIRE(static_cast<bool>(policy));
  CHECK(policy->overflow);
  CHECK(policy->name() == "bucketed(16,64,256,+inf)");
  CHECK(spec(*policy, 200).argument == 256);
  SpecValue overflow = spec(*policy, 100000);
  CHECK(overflow == SpecValue{SpecKind::bucketed, k_unbounded_bucket});
  CHECK(spec(*policy, k_spec_base - 1) == overflow); // one variant for all of them
  CHECK(overflow.raw() >= k_spec_base - 1);          // the kernel's upper_bound is true
  CHECK(overflow.describe() == "<=inf");
  CHECK(*SpecValue::parse(llvm::json::Value("<=inf")) == overflow);
  for (const char* bad : {"bucketed(+inf)", "bucketed(16,+inf,64)", "bucketed(16,999999999999)"}) {
    auto parsed = Policy::parse(bad);
    CHECK_FALSE(static_cast<bool>(parsed));
    llvm::consumeError(parsed.takeError());
  }
}

TEST_CASE("power-of-two buckets stay within the spec word's range") {
  SpecValue top = spec(Policy::bucketed_pow2(), k_spec_base - 1);
  CHECK(top.argument == k_unbounded_bucket);
  CHECK(top.argument >= k_spec_base - 1);
  auto word = SpecValue::from_word(top.word());
  REQUIRE(static_cast<bool>(word));
  CHECK(*word == top);
  CHECK(spec(Policy::bucketed_pow2(), 1ll << 39).argument == 1ll << 39);
}

TEST_CASE("the divisibility policy makes two variants, three with the value-1 variant") {
  Policy div = Policy::divisibility(16);
  CHECK(spec(div, 32) == SpecValue{SpecKind::divisible, 16});
  CHECK(spec(div, 33) == SpecValue{SpecKind::not_divisible, 0});
  CHECK(spec(div, 1) == SpecValue{SpecKind::not_divisible, 0});
  Policy triton = Policy::triton();
  CHECK(spec(triton, 1) == SpecValue{SpecKind::one, 1});
  CHECK(spec(triton, 48) == SpecValue{SpecKind::divisible, 16});
  CHECK(spec(triton, 47) == SpecValue{SpecKind::not_divisible, 0});
}

TEST_CASE("negative and huge values are rejected with a message") {
  auto negative = specialize(Policy::exact(), -1);
  REQUIRE_FALSE(static_cast<bool>(negative));
  CHECK(llvm::toString(negative.takeError()).find("-1") != std::string::npos);
  auto huge = specialize(Policy::dynamic(), k_spec_base);
  CHECK_FALSE(static_cast<bool>(huge));
  llvm::consumeError(huge.takeError());
}

TEST_CASE("policy names parse back to the same policy") {
  for (const Policy& policy : {Policy::dynamic(), Policy::exact(), Policy::bucketed_pow2(),
                               Policy::bucketed({8, 32, 128}), Policy::bucketed({8, 32}, true),
                               Policy::divisibility(16),
                               Policy::triton()}) {
    auto parsed = Policy::parse(policy.name());
    REQUIRE(static_cast<bool>(parsed));
    CHECK(*parsed == policy);
  }
  CHECK(Policy::parse("triton")->name() == "divisibility(16)+one");
  auto bad = Policy::parse("sometimes");
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK(llvm::toString(bad.takeError()).find("sometimes") != std::string::npos);
  auto unsorted = Policy::parse("bucketed(64,16)");
  CHECK_FALSE(static_cast<bool>(unsorted));
  llvm::consumeError(unsorted.takeError());
}

TEST_CASE("described spec values parse back, and so do spec words") {
  for (SpecValue value : {SpecValue{SpecKind::dynamic, 0}, SpecValue{SpecKind::exact, 62},
                          SpecValue{SpecKind::bucketed, 64}, SpecValue{SpecKind::divisible, 16},
                          SpecValue{SpecKind::not_divisible, 0}, SpecValue{SpecKind::one, 1}}) {
    llvm::json::Value described = value.kind == SpecKind::exact
                                      ? llvm::json::Value(value.argument)
                                      : llvm::json::Value(value.describe());
    auto parsed = SpecValue::parse(described);
    REQUIRE(static_cast<bool>(parsed));
    CHECK(*parsed == value);
    auto from_word = SpecValue::from_word(value.word());
    REQUIRE(static_cast<bool>(from_word));
    CHECK(*from_word == value);
  }
}
