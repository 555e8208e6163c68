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
    return fmt::format("bucketed({})", fmt::join(buckets, ","));
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
  }
  return llvm::Error::success();
}

llvm::Expected<Policy> Policy::parse(llvm::StringRef text) {
  llvm::StringRef t = text.trim();
  auto bad = [&] {
    return make_error(Errc::invalid_argument,
                      "'{}' is not a policy; expected dynamic, exact, bucketed(pow2), "
                      "bucketed(16,64,...), divisibility(N), divisibility(N)+one or triton",
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
    for (llvm::StringRef part : parts) {
      int64_t bound = 0;
      if (part.trim().getAsInteger(10, bound))
        return bad();
      bounds.push_back(bound);
    }
    Policy policy = Policy::bucketed(std::move(bounds));
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
  case SpecKind::bucketed: return fmt::format("<={}", argument);
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

int64_t bucket_of(const std::vector<int64_t>& bounds, int64_t value) {
  if (bounds.empty()) {
    int64_t bucket = 1;
    while (bucket < value)
      bucket *= 2;
    return bucket;
  }
  auto it = std::lower_bound(bounds.begin(), bounds.end(), value);
  // Values above the last bound share the last bucket's variant: bounded variant count.
  return it == bounds.end() ? bounds.back() : *it;
}

} // namespace

llvm::Expected<SpecValue> specialize(const Policy& policy, int64_t value) {
  if (value < 0 || value >= k_spec_base)
    return make_error(Errc::invalid_argument,
                      "value {} cannot be specialized: policies take values in [0, 10^12)", value);
  switch (policy.kind) {
  case PolicyKind::dynamic: return SpecValue{SpecKind::dynamic, 0};
  case PolicyKind::exact: return SpecValue{SpecKind::exact, value};
  case PolicyKind::bucketed: return SpecValue{SpecKind::bucketed, bucket_of(policy.buckets, value)};
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
