// Kernels brought at run time: text and file sources, in-memory headers, defines, and the
// errors a user meets (real NVRTC compiles, no GPU).
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/kernel_source.h"

#include "support/error.h"

#include <llvm/Support/FileSystem.h>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

constexpr const char* k_scale_text = R"(
#include "scale_factor.h"
template <int BLOCK> __global__ void scale(float* x, long long num_tokens) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < num_tokens) x[i] *= SCALE_FACTOR;
}
)";

KernelDef scale_kernel() {
  KernelDef def;
  def.id = "user_scale";
  def.source = KernelSource::from_text("scale.cu", k_scale_text);
  def.function = "scale";
  def.params = {ParamDef::user("num_tokens", Policy::dynamic()),
                ParamDef::user("block", Policy::exact())};
  def.headers = {{"scale_factor.h", "#pragma once\n#define SCALE_FACTOR 2.0f\n"}};
  return def;
}

KernelId add(Engine& engine, const KernelDef& def) {
  auto id = engine.add_kernel(def);
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  return *id;
}

bool has_entries(const std::string& root) {
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".sjc"))
      return true;
  return false;
}

std::string prepare_error(Engine& engine, const KernelDef& def, std::vector<int64_t> values) {
  auto id = engine.add_kernel(def);
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  auto variant = engine.prepare(*id, values);
  REQUIRE_FALSE(static_cast<bool>(variant));
  return llvm::toString(variant.takeError());
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("user parameters: dynamic values are no template parameter, others pass raw") {
  CHECK(ParamDef::user("n", Policy::dynamic()).encoding == ParamEncoding::none);
  CHECK(ParamDef::user("n", Policy::exact()).encoding == ParamEncoding::raw);
  CHECK(ParamDef::user("n", Policy::bucketed_pow2()).encoding == ParamEncoding::raw);
  CHECK(ParamDef::user("n", Policy::divisibility(16, true)).encoding == ParamEncoding::raw);
  KernelDef def = scale_kernel();
  def.params[0].encoding = ParamEncoding::none;
  def.params[1].encoding = ParamEncoding::none; // exact cannot be a plain argument
  ErrorSummary error = summarize(def.validate());
  CHECK(error.code == Errc::invalid_argument);
  CHECK(contains(error.message, "'block'"));
}

TEST_CASE("a kernel from a string compiles once for every value of a dynamic parameter") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelId kernel = add(engine, scale_kernel());
  const Variant* first = nullptr;
  for (int64_t tokens = 1; tokens <= 1000; ++tokens) {
    auto variant = engine.prepare(kernel, {tokens, 128});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    if (first == nullptr)
      first = *variant;
    CHECK(*variant == first);
  }
  CHECK(first->name_expression == "scale<128>");
  CHECK(engine.stats().compiles == 1);
  CHECK(engine.stats().memory_hits == 999);
  CHECK(has_entries(dir / "cache"));

  Engine fresh(test::config_in(dir));
  auto again = fresh.prepare(add(fresh, scale_kernel()), {77, 128});
  REQUIRE(static_cast<bool>(again));
  CHECK((*again)->source == VariantSource::disk);
  CHECK((*again)->key == first->key);
}

TEST_CASE("the key follows the text, the in-memory headers and the defines") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto key_of = [&](const KernelDef& def) {
    auto variant = engine.prepare(add(engine, def), {5, 64});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    return (*variant)->key;
  };
  KernelDef base = scale_kernel();
  Digest128 key = key_of(base);
  KernelDef header = base;
  header.headers[0].text = "#pragma once\n#define SCALE_FACTOR 3.0f\n";
  CHECK(key_of(header) != key);
  KernelDef define = base;
  define.defines = {"UNUSED_FLAG=1"};
  Digest128 defined = key_of(define);
  CHECK(defined != key);
  define.defines = {"UNUSED_FLAG=1", "OTHER"};
  KernelDef reordered = define;
  reordered.defines = {"OTHER", "UNUSED_FLAG=1"};
  CHECK(key_of(define) == key_of(reordered));
}

TEST_CASE("a file source is read when defined and keyed by its contents, not its path") {
  TempDir dir;
  for (const char* folder : {"a", "b"}) {
    REQUIRE(!llvm::sys::fs::create_directories(dir / folder));
    test::write_file(dir / (std::string(folder) + "/scale.cu"), k_scale_text);
    test::write_file(dir / (std::string(folder) + "/scale_factor.h"), "#define SCALE_FACTOR 2.0f\n");
  }
  Engine engine(test::config_in(dir));
  auto key_of = [&](const std::string& path) {
    KernelDef def = scale_kernel();
    def.source = KernelSource::from_file(path);
    def.headers.clear(); // found next to the file instead
    auto variant = engine.prepare(add(engine, def), {5, 64});
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    return (*variant)->key;
  };
  CHECK(key_of(dir / "a/scale.cu") == key_of(dir / "b/scale.cu"));

  KernelDef missing = scale_kernel();
  missing.source = KernelSource::from_file(dir / "nope.cu");
  ErrorSummary error = summarize(engine.add_kernel(missing).takeError());
  CHECK(error.code == Errc::not_found);
  CHECK(contains(error.message, "nope.cu"));
}

TEST_CASE("include directories must exist when the kernel is defined") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef def = scale_kernel();
  def.include_dirs = {dir / "no_such_dir"};
  ErrorSummary error = summarize(engine.add_kernel(def).takeError());
  CHECK(error.code == Errc::not_found);
  CHECK(contains(error.message, "no_such_dir"));

  KernelDef embedded;
  embedded.id = "embedded_with_dirs";
  embedded.source = "test/scale_tokens.cu";
  embedded.function = "specjit_kernels::scale_tokens";
  embedded.include_dirs = {dir.path()};
  CHECK(summarize(engine.add_kernel(embedded).takeError()).code == Errc::invalid_argument);
}

TEST_CASE("-I in options is refused with a pointer to include_dirs") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef def = scale_kernel();
  def.options = {"-I/usr/include"};
  std::string message = prepare_error(engine, def, {5, 64});
  CHECK(contains(message, "-I/usr/include"));
  CHECK(contains(message, "include_dirs"));
  CHECK_FALSE(has_entries(dir / "cache"));
}

TEST_CASE("a compile error names the file, the line and the options, and writes nothing") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef def = scale_kernel();
  def.source = KernelSource::from_text("broken.cu", "template <int B> __global__ void scale(\n"
                                                    "  float* x) { x[0] = undeclared_name; }\n");
  def.options = {"--use_fast_math"};
  std::string message = prepare_error(engine, def, {5, 64});
  CHECK(contains(message, "broken.cu(2)"));
  CHECK(contains(message, "undeclared_name"));
  CHECK(contains(message, "--use_fast_math"));
  CHECK_FALSE(has_entries(dir / "cache"));
}

TEST_CASE("a missing include names the includer, the line and the missing name") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef def = scale_kernel();
  def.headers.clear();
  std::string message = prepare_error(engine, def, {5, 64});
  CHECK(contains(message, "scale.cu(2)"));
  CHECK(contains(message, "scale_factor.h"));
  CHECK_FALSE(has_entries(dir / "cache"));
}

TEST_CASE("parameters that do not fit the template name the kernel and its declaration") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef def = scale_kernel();
  def.params.push_back(ParamDef::user("extra", Policy::exact()));
  std::string message = prepare_error(engine, def, {5, 64, 3});
  CHECK(contains(message, "user_scale"));
  CHECK(contains(message, "scale<64, 3>"));
  CHECK(contains(message, "block (exact)"));
  CHECK(contains(message, "extra (exact)"));
  CHECK(contains(message, "num_tokens (dynamic, not a template parameter)"));
  CHECK_FALSE(has_entries(dir / "cache"));
}
