#include "runtime/specialization.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <fmt/ranges.h>

namespace specjit::runtime {

std::string Policy::name() const {
  switch (kind) {
  case PolicyKind::dynamic: return "dynamic";
  case PolicyKind::exact: return "exact";
  case PolicyKind::bucketed:
    if (buckets.empty())
      return "bucketed(pow2)";
    return fmt::format("bucketed({}{})", fmt::join(buckets, ","), overflow ? ",+inf" : "");
  case PolicyKind::divisibility:
    return fmt::format("divisibility({}){}", divisor, special_one ? "+one" : "");
  }
  return "dynamic";
}

llvm::Error Policy::validate() const {
  if (kind == PolicyKind::divisibility && divisor < 2)
    return make_error(Errc::invalid_argument, "policy {}: the divisor must be at least 2", name());
  if (kind == PolicyKind::bucketed) {
    if (!std::is_sorted(buckets.begin(), buckets.end()) ||
        std::adjacent_find(buckets.begin(), buckets.end()) != buckets.end())
      return make_error(Errc::invalid_argument, "policy {}: bucket bounds must strictly increase",
                        name());
    if (!buckets.empty() && buckets.front() < 0)
      return make_error(Errc::invalid_argument, "policy {}: bucket bounds must be >= 0", name());
    if (!buckets.empty() && buckets.back() >= k_unbounded_bucket)
      return make_error(Errc::invalid_argument,
                        "policy {}: bucket bounds must be below {} (use +inf for the rest)",
                        name(), k_unbounded_bucket);
    if (overflow && buckets.empty())
      return make_error(Errc::invalid_argument,
                        "policy {}: an overflow bucket needs a list of bounds", name());
  }
  return llvm::Error::success();
}

llvm::Expected<Policy> Policy::parse(llvm::StringRef text) {
  llvm::StringRef t = text.trim();
  auto bad = [&] {
    return make_error(Errc::invalid_argument,
                      "'{}' is not a policy; expected dynamic, exact, bucketed(pow2), "
                      "bucketed(16,64,...), bucketed(16,64,...,+inf), divisibility(N), "
                      "divisibility(N)+one or triton",
                      text.str());
  };
  if (t == "dynamic")
    return Policy::dynamic();
  if (t == "exact")
    return Policy::exact();
  if (t == "triton")
    return Policy::triton();
  if (t == "bucketed" || t == "bucketed(pow2)")
    return Policy::bucketed_pow2();
  if (t.consume_front("bucketed(") && t.consume_back(")")) {
    std::vector<int64_t> bounds;
    llvm::SmallVector<llvm::StringRef, 8> parts;
    t.split(parts, ',');
    bool overflow = false;
    for (llvm::StringRef part : parts) {
      int64_t bound = 0;
      if (overflow) // +inf comes last
        return bad();
      if (part.trim() == "+inf" || part.trim() == "inf") {
        overflow = true;
        continue;
      }
      if (part.trim().getAsInteger(10, bound))
        return bad();
      bounds.push_back(bound);
    }
    Policy policy = Policy::bucketed(std::move(bounds), overflow);
    if (auto err = policy.validate())
      return err;
    return policy;
  }
  if (t.consume_front("divisibility(")) {
    bool one = t.consume_back("+one");
    int64_t divisor = 0;
    if (!t.consume_back(")") || t.trim().getAsInteger(10, divisor))
      return bad();
    Policy policy = Policy::divisibility(divisor, one);
    if (auto err = policy.validate())
      return err;
    return policy;
  }
  return bad();
}

std::string SpecValue::describe() const {
  switch (kind) {
  case SpecKind::dynamic: return "dynamic";
  case SpecKind::exact: return std::to_string(argument);
  case SpecKind::bucketed:
    return argument == k_unbounded_bucket ? std::string("<=inf") : fmt::format("<={}", argument);
  case SpecKind::divisible: return fmt::format("%{}", argument);
  case SpecKind::not_divisible: return "any";
  case SpecKind::one: return "1";
  }
  return "dynamic";
}

llvm::Expected<SpecValue> SpecValue::parse(const llvm::json::Value& described) {
  if (auto number = described.getAsInteger()) {
    if (*number < 0 || *number >= k_spec_base)
      return make_error(Errc::invalid_argument, "variant value {} is out of range", *number);
    return SpecValue{SpecKind::exact, *number};
  }
  auto text = described.getAsString();
  if (!text)
    return make_error(Errc::invalid_argument, "a variant value must be a number or a string");
  llvm::StringRef t = *text;
  int64_t argument = 0;
  if (t == "dynamic")
    return SpecValue{SpecKind::dynamic, 0};
  if (t == "any")
    return SpecValue{SpecKind::not_divisible, 0};
  if (t == "1")
    return SpecValue{SpecKind::one, 1};
  if (t == "<=inf")
    return SpecValue{SpecKind::bucketed, k_unbounded_bucket};
  if (t.consume_front("<=") && !t.getAsInteger(10, argument) && argument >= 0)
    return SpecValue{SpecKind::bucketed, argument};
  if (t.consume_front("%") && !t.getAsInteger(10, argument) && argument >= 2)
    return SpecValue{SpecKind::divisible, argument};
  return make_error(Errc::invalid_argument,
                    "'{}' is not a variant value; expected a number, dynamic, <=N, %N, any or 1",
                    text->str());
}

llvm::Expected<SpecValue> SpecValue::from_word(int64_t word) {
  if (word < 0 || word / k_spec_base > static_cast<int64_t>(SpecKind::one))
    return make_error(Errc::invalid_argument, "{} is not a specialization word", word);
  return SpecValue{static_cast<SpecKind>(word / k_spec_base), word % k_spec_base};
}

namespace {

llvm::Expected<int64_t> bucket_of(const Policy& policy, int64_t value) {
  const std::vector<int64_t>& bounds = policy.buckets;
  if (bounds.empty()) {
    int64_t bucket = 1;
    while (bucket < value)
      bucket *= 2;
    // 2^40 is past the spec word's argument range: the largest bucket is every larger value.
    return bucket >= k_spec_base ? k_unbounded_bucket : bucket;
  }
  auto it = std::lower_bound(bounds.begin(), bounds.end(), value);
  if (it != bounds.end())
    return *it;
  // Sharing the last bucket would tell the kernel an upper_bound below the value it gets.
  if (policy.overflow)
    return k_unbounded_bucket;
  return make_error(Errc::invalid_argument,
                    "value {} is above the last bucket bound {} of policy {}; declare an "
                    "overflow bucket ({}) or a larger bound",
                    value, bounds.back(), policy.name(),
                    Policy::bucketed(bounds, true).name());
}

} // namespace

llvm::Expected<SpecValue> specialize(const Policy& policy, int64_t value) {
  if (value < 0 || value >= k_spec_base)
    return make_error(Errc::invalid_argument,
                      "value {} cannot be specialized: policies take values in [0, 10^12)", value);
  switch (policy.kind) {
  case PolicyKind::dynamic: return SpecValue{SpecKind::dynamic, 0};
  case PolicyKind::exact: return SpecValue{SpecKind::exact, value};
  case PolicyKind::bucketed: {
    auto bucket = bucket_of(policy, value);
    if (!bucket)
      return bucket.takeError();
    return SpecValue{SpecKind::bucketed, *bucket};
  }
  case PolicyKind::divisibility:
    if (policy.special_one && value == 1)
      return SpecValue{SpecKind::one, 1};
    if (value % policy.divisor == 0)
      return SpecValue{SpecKind::divisible, policy.divisor};
    return SpecValue{SpecKind::not_divisible, 0};
  }
  return SpecValue{};
}

} // namespace specjit::runtime
