// The "kernels" section of manifests: definitions as a run-time definition builds them, and
// the errors a runtime engineer meets, each with the field's file and line.
#include "deploy/manifest.h"
#include "deploy/manifest_source.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/Support/FileSystem.h>

#include <string>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::deploy;
using specjit::test::TempDir;

namespace {

// <dir>/kernels/scale.cu including "tile.h" from <dir>/include.
struct KernelTree {
  TempDir dir;
  KernelTree() {
    REQUIRE(!llvm::sys::fs::create_directories(dir / "kernels"));
    REQUIRE(!llvm::sys::fs::create_directories(dir / "include"));
    test::write_file(dir / "kernels/scale.cu",
                     "#include \"tile.h\"\ntemplate <int BLOCK> __global__ void scale(float* x, "
                     "long long n) { if (threadIdx.x < n) x[threadIdx.x] *= TILE_SCALE; }\n");
    test::write_file(dir / "include/tile.h", "#pragma once\n#define TILE_SCALE 2.0f\n");
  }
  std::string manifest() const { return dir / "m.json"; }
};

// One kernels entry with `fields` added, and a variant of it.
std::string manifest_with(const std::string& fields) {
  return R"({"kernels": [
  {"id": "app_scale", "function": "scale",
   "params": [{"name": "num_tokens"}, {"name": "block", "policy": "exact"}],
   )" + fields +
         R"(}],
 "variants": [{"kernel": "app_scale", "values": {"num_tokens": [1, 7, 64], "block": 128}}]})";
}

Manifest parse_ok(const KernelTree& tree, const std::string& text) {
  auto manifest = parse_manifest_document(text, tree.manifest());
  REQUIRE_MESSAGE(static_cast<bool>(manifest), llvm::toString(manifest.takeError()));
  return std::move(*manifest);
}

std::string parse_error(const KernelTree& tree, const std::string& text) {
  auto manifest = parse_manifest_document(text, tree.manifest());
  REQUIRE_FALSE(static_cast<bool>(manifest));
  return llvm::toString(manifest.takeError());
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("a manifest kernel is the definition a run-time definition of the same file builds") {
  KernelTree tree;
  Manifest manifest =
      parse_ok(tree, manifest_with(R"("source": "kernels/scale.cu", "include_dirs": ["include"],
   "defines": {"TILE": 64, "EPS": "1e-6", "FAST": null}, "options": ["--use_fast_math"])"));
  REQUIRE(manifest.kernels.size() == 1);
  KernelDef expected;
  expected.id = "app_scale";
  expected.source = KernelSource::from_file(tree.dir / "kernels/scale.cu");
  expected.function = "scale";
  expected.params = {ParamDef::user("num_tokens", Policy::dynamic()),
                     ParamDef::user("block", Policy::exact())};
  expected.include_dirs = {tree.dir / "include"};
  expected.defines = {"EPS=1e-6", "FAST", "TILE=64"};
  expected.options = {"--use_fast_math"};
  CHECK(manifest.kernels[0] == expected);
  // Every token count of the dynamic parameter is the same variant.
  REQUIRE(manifest.variants.size() == 1);
  CHECK(manifest.variants[0].def == expected);
  CHECK(manifest.variants[0].values == std::vector<int64_t>{1, 128});
}

TEST_CASE("absolute paths are kept and a variant's policies set a user parameter's encoding") {
  KernelTree tree;
  std::string text = R"({"kernels": [{"id": "app_scale", "function": "scale",
    "source": ")" + (tree.dir / "kernels/scale.cu") +
                     R"(", "include_dirs": [")" + (tree.dir / "include") + R"("],
    "params": [{"name": "num_tokens"}, {"name": "block", "policy": "exact"}]}],
   "variants": [{"kernel": "app_scale", "values": {"num_tokens": [1, 2], "block": 64},
                 "policies": {"num_tokens": "exact"}}]})";
  Manifest manifest = parse_ok(tree, text);
  CHECK(manifest.kernels[0].source.name == tree.dir / "kernels/scale.cu");
  REQUIRE(manifest.variants.size() == 2);
  CHECK(manifest.variants[0].def.params[0].encoding == ParamEncoding::raw);
  CHECK(manifest.kernels[0].params[0].encoding == ParamEncoding::none);
  // parse_manifest gives the variants alone.
  auto variants = parse_manifest(text, tree.manifest());
  REQUIRE(static_cast<bool>(variants));
  CHECK(variants->size() == 2);
}

TEST_CASE("a missing or unreadable source file names the field, its line and the path") {
  KernelTree tree;
  std::string missing = parse_error(tree, manifest_with(R"("source": "kernels/nope.cu")"));
  CHECK(contains(missing, "m.json:4: field 'kernels[0].source': kernel app_scale: cannot read "
                          "kernel source "));
  CHECK(contains(missing, "kernels/nope.cu"));
  CHECK(contains(parse_error(tree, manifest_with(R"("source": "kernels")")), "is a directory"));
  CHECK(contains(parse_error(tree, manifest_with(R"("source": "/dev/zero")")),
                 "is a character device"));
}

TEST_CASE("an include directory that is missing or no directory names the element") {
  KernelTree tree;
  std::string missing = parse_error(
      tree, manifest_with(R"("source": "kernels/scale.cu", "include_dirs": ["include", "nope"])"));
  CHECK(contains(missing, "m.json:4: field 'kernels[0].include_dirs[1]': kernel app_scale: "
                          "include directory '"));
  CHECK(contains(missing, "nope' is not usable"));
  CHECK(contains(
      parse_error(
          tree,
          manifest_with(R"("source": "kernels/scale.cu", "include_dirs": ["kernels/scale.cu"])")),
      "is not a directory"));
  CHECK(contains(
      parse_error(tree, manifest_with(R"("source": "kernels/scale.cu", "include_dirs": [""])")),
      "field 'kernels[0].include_dirs[0]': an include directory is empty"));
}

TEST_CASE("ids must be new: not a built-in kernel's, not another entry's") {
  KernelTree tree;
  std::string entry = R"({"id": "app_scale", "function": "scale", "source": "kernels/scale.cu"})";
  std::string twice = parse_error(tree, "{\"kernels\": [\n" + entry + ",\n" + entry + "]}");
  CHECK(contains(twice, "m.json:3: field 'kernels[1].id': kernel 'app_scale' is already defined "
                        "at "));
  CHECK(contains(twice, "m.json:2"));
  std::string builtin = parse_error(
      tree,
      R"({"kernels": [{"id": "scale_tokens", "function": "f", "source": "kernels/scale.cu"}]})");
  CHECK(contains(builtin, "field 'kernels[0].id': 'scale_tokens' is a kernel specjit ships"));
}

TEST_CASE("a variant of an unknown id lists the manifest's kernels among the known ones") {
  KernelTree tree;
  std::string message = parse_error(
      tree, R"({"kernels": [{"id": "app_scale", "function": "scale", "source": "kernels/scale.cu",
   "params": [{"name": "block", "policy": "exact"}]}],
  "variants": [{"kernel": "app_scal", "values": {"block": 1}}]})");
  CHECK(contains(message, "m.json:3: field 'variants[0].kernel': unknown kernel 'app_scal'; "
                          "known kernels: app_scale, inv_rope_fp8_quant"));
}

TEST_CASE("bad policies, options, defines, fields and definitions name the field") {
  KernelTree tree;
  auto error_of = [&](const std::string& fields) {
    return parse_error(tree, manifest_with(R"("source": "kernels/scale.cu", )" + fields));
  };
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "k", "function": "f",
    "source": "kernels/scale.cu", "params": [{"name": "n", "policy": "sometimes"}]}]})"),
                 "m.json:2: field 'kernels[0].params[0].policy': 'sometimes' is not a policy"));
  CHECK(contains(error_of(R"("options": ["--use_fast_math", "-Iother"])"),
                 "field 'kernels[0].options[1]': option '-Iother' is set by specjit"));
  CHECK(contains(error_of(R"("options": ["--gpu-architecture=sm_80"])"), "is set by specjit"));
  CHECK(contains(error_of(R"("defines": {"A": true})"),
                 "field 'kernels[0].defines.A': expected a string, an integer or null"));
  CHECK(contains(error_of(R"("defines": {"A B": 1})"), "define 'A B=1' must read NAME"));
  CHECK(
      contains(error_of(R"("defines": ["A"])"), "field 'kernels[0].defines': expected an object"));
  CHECK(contains(error_of(R"("colour": "blue")"),
                 "field 'kernels[0].colour': unknown field; expected one of: id, source"));
  CHECK(contains(error_of(R"("include_dirs": "include")"),
                 "field 'kernels[0].include_dirs': expected a list of strings, found a string"));
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "k", "source": "kernels/scale.cu"}]})"),
                 "field 'kernels[0].function': missing"));
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "k", "function": "f"}]})"),
                 "field 'kernels[0].source': missing"));
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "k", "function": "f",
    "source": "kernels/scale.cu", "params": [{"name": "n"}, {"name": "n"}]}]})"),
                 "parameter 'n' is declared twice"));
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "no good", "function": "f",
    "source": "kernels/scale.cu"}]})"),
                 "kernel id 'no good' must be a plain identifier"));
  std::string many;
  for (int i = 0; i <= 12; ++i)
    many += (i ? ", " : "") + std::string("{\"name\": \"p") + std::to_string(i) + "\"}";
  CHECK(contains(parse_error(tree, R"({"kernels": [{"id": "k", "function": "f",
    "source": "kernels/scale.cu", "params": [)" +
                                       many + "]}]}"),
                 "13 parameters; a kernel takes at most 12"));
}
