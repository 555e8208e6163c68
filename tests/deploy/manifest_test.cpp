#include "deploy/builtin_kernels.h"
#include "deploy/manifest.h"

#include "support/error.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;

namespace {

std::vector<VariantRequest> parse_ok(const std::string& text) {
  auto requests = parse_manifest(text, "m.json");
  REQUIRE_MESSAGE(static_cast<bool>(requests), llvm::toString(requests.takeError()));
  return std::move(*requests);
}

std::string parse_error(const std::string& text) {
  auto requests = parse_manifest(text, "m.json");
  REQUIRE_FALSE(static_cast<bool>(requests));
  return llvm::toString(requests.takeError());
}

} // namespace

TEST_CASE("a manifest lists variants of named kernels with their policies") {
  auto requests = parse_ok(R"({"version": 1, "variants": [
    {"kernel": "scale_tokens", "values": {"cols": 128, "num_tokens": 62},
     "policies": {"num_tokens": "exact"}}]})");
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].def.id == "scale_tokens");
  CHECK(requests[0].values == std::vector<int64_t>{128, 62});
  CHECK(requests[0].def.params[1].policy.kind == PolicyKind::exact);
}

TEST_CASE("a list of values expands to one variant per combination") {
  auto requests = parse_ok(R"({"variants": [{"kernel": "scale_tokens",
    "values": {"cols": [64, 128], "num_tokens": [1, 2, 3]}, "policies": {"num_tokens": "exact"}}]})");
  CHECK(requests.size() == 6);
}

TEST_CASE("values that specialize to the same variant appear once") {
  // num_tokens is dynamic by default: every token count is the same variant.
  auto requests = parse_ok(R"({"variants": [
    {"kernel": "scale_tokens", "values": {"cols": 128, "num_tokens": [1, 7, 99]}},
    {"kernel": "scale_tokens", "values": {"cols": 128, "num_tokens": 5}}]})");
  CHECK(requests.size() == 1);
}

TEST_CASE("a model entry derives the variants of its kernel") {
  auto requests = parse_ok(
      R"({"models": [{"type": "inv_rope_fp8_quant", "groups": 8, "heads_per_group": 16}]})");
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].def.id == "inv_rope_fp8_quant");
  CHECK(requests[0].values[0] == 8);
  CHECK(requests[0].values[1] == 16);
  auto exact = parse_ok(R"({"models": [{"type": "inv_rope_fp8_quant", "groups": 1,
    "heads_per_group": 4, "num_tokens_policy": "exact", "num_tokens": [1, 2, 4]}]})");
  CHECK(exact.size() == 3);
  CHECK(!model_types().empty());
}

TEST_CASE("an empty manifest is valid and asks for nothing") {
  CHECK(parse_ok(R"({"version": 1})").empty());
}

TEST_CASE("a syntax error names the file, line and column") {
  std::string message = parse_error("{\n  \"variants\": [\n    {\"kernel\": }\n  ]\n}");
  INFO(message);
  CHECK(message.find("m.json:3:16: invalid JSON: ") == 0); // the '}' where a value should be
  CHECK(message.find("byte=") == std::string::npos);       // the parser's offset is left out
}

TEST_CASE("a key given twice in one object is an error naming the file, line and field") {
  std::string message = parse_error(R"({
  "variants": [
    {"kernel": "scale_tokens",
     "values": {"cols": 128, "num_tokens": [1, 2],
                "cols": 256}}]})");
  CHECK(message == "m.json:5: field 'variants[0].values.cols': duplicate key; each key may "
                   "appear once per object");
  CHECK(parse_error("{\"variants\": [], \"variants\": []}").find("m.json:1: field 'variants'") ==
        0);
  // The same key in two different objects is fine.
  CHECK(parse_ok(R"({"variants": [{"kernel": "scale_tokens", "values": {"cols": 1, "num_tokens": 1}},
                {"kernel": "scale_tokens", "values": {"cols": 2, "num_tokens": 1}}]})")
            .size() == 2);
}

TEST_CASE("a value above a manifest policy's last bucket names the field") {
  std::string message = parse_error(R"j({"variants": [{"kernel": "scale_tokens",
     "values": {"cols": 128, "num_tokens": 1000},
     "policies": {"num_tokens": "bucketed(16,64)"}}]})j");
  INFO(message);
  CHECK(message.find("m.json:2: field 'variants[0].values.num_tokens'") == 0);
  CHECK(message.find("value 1000 is above the last bucket bound 64") != std::string::npos);
}

TEST_CASE("an unknown kernel names the field and its line") {
  std::string message = parse_error(
      "{\"version\": 1,\n \"variants\": [\n  {\"kernel\": \"scale_tokens\", \"values\": {\"cols\": "
      "1, \"num_tokens\": 1}},\n  {\"kernel\": \"nope\",\n   \"values\": {}}]}");
  CHECK(message.find("m.json:4: field 'variants[1].kernel': unknown kernel 'nope'") == 0);
  CHECK(message.find("scale_tokens") != std::string::npos);
}

TEST_CASE("a value of the wrong type names the field path and line") {
  std::string message = parse_error(R"({
  "variants": [
    {"kernel": "scale_tokens",
     "values": {
       "cols": 128,
       "num_tokens": "many"}}]})");
  CHECK(message ==
        "m.json:6: field 'variants[0].values.num_tokens': expected an integer, found a string");
}

TEST_CASE("missing and unknown parameters, bad policies and bad versions are errors") {
  CHECK(parse_error(R"({"variants": [{"kernel": "scale_tokens", "values": {"cols": 1}}]})")
            .find("field 'variants[0].values.num_tokens': missing") != std::string::npos);
  CHECK(parse_error(R"({"variants": [{"kernel": "scale_tokens",
      "values": {"cols": 1, "num_tokens": 1, "rows": 2}}]})")
            .find("field 'variants[0].values.rows': unknown field") != std::string::npos);
  CHECK(parse_error(R"({"variants": [{"kernel": "scale_tokens", "values": {"cols": 1,
      "num_tokens": 1}, "policies": {"num_tokens": "sometimes"}}]})")
            .find("field 'variants[0].policies.num_tokens'") != std::string::npos);
  CHECK(parse_error(R"({"version": 2})").find("field 'version': unsupported version 2") !=
        std::string::npos);
  CHECK(parse_error(R"({"variants": [{"kernel": "scale_tokens", "values": {"cols": -1,
      "num_tokens": 1}}]})")
            .find("field 'variants[0].values.cols': expected an integer >= 0") !=
        std::string::npos);
  CHECK(parse_error(R"({"models": [{"type": "no_such_model"}]})")
            .find("field 'models[0].type': unknown model type") != std::string::npos);
  CHECK(parse_error(R"({"models": [{"type": "inv_rope_fp8_quant", "groups": 2}]})")
            .find("field 'models[0].heads_per_group': missing") != std::string::npos);
  CHECK(parse_error(R"({"extra": 1})").find("field 'extra': unknown field") != std::string::npos);
  CHECK(parse_error("[1, 2]").find("top level") != std::string::npos);
}

TEST_CASE("hostile input is an error, never a crash") {
  CHECK(parse_error(std::string(100000, '[')).find("nested deeper") != std::string::npos);
  CHECK(!parse_error("").empty());
  CHECK(!parse_error("{\"variants\": [{\"kernel\": \"scale_tokens\", \"values\": {\"cols\": "
                     "[1,2,3,4,5,6,7,8,9,10], \"num_tokens\": [" +
                     [] {
                       std::string list;
                       for (int i = 1; i <= 20000; ++i)
                         list += (i > 1 ? "," : "") + std::to_string(i);
                       return list;
                     }() +
                     "]}, \"policies\": {\"num_tokens\": \"exact\"}}]}")
             .empty());
}

TEST_CASE("a policy set on a built-in kernel's enumeration parameter keeps its enumerators") {
  // The first built-in kernel with an enumeration parameter (the wgmma MoE GEMMs' orientation).
  const KernelDef* def = nullptr;
  size_t index = 0;
  for (const KernelDef& d : builtin_kernels())
    for (size_t i = 0; i < d.params.size() && def == nullptr; ++i)
      if (d.params[i].is_enum()) {
        def = &d;
        index = i;
      }
  REQUIRE(def != nullptr);
  std::vector<std::string> values;
  for (const ParamDef& p : def->params)
    values.push_back(fmt::format("\"{}\": 1", p.name));
  auto manifest = [&](const char* policy) {
    return fmt::format(R"({{"variants": [{{"kernel": "{}", "values": {{{}}},
        "policies": {{"{}": "{}"}}}}]}})",
                       def->id, fmt::join(values, ", "), def->params[index].name, policy);
  };
  auto requests = parse_ok(manifest("exact"));
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].def.params[index] == def->params[index]);
  // An enumeration compiles its value in: a policy that would not is refused, naming the field.
  CHECK(parse_error(manifest("dynamic")).find(def->params[index].name) != std::string::npos);
}
