// A failed variant's error reaches every caller with its type: the one that resolved it and the
// ones that waited on its slot (runtime/stored_failure.h). No GPU.
#include "engine_fixture.h"

#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/stored_failure.h"
#include "runtime/test_kernel.h"

#include "jit/compiler.h"
#include "support/error.h"

#include <thread>

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

// The kinds of the error's parts, in order.
std::vector<std::string> kinds(llvm::Error error) {
  std::vector<std::string> out;
  llvm::handleAllErrors(
      std::move(error), [&](const DriverUnavailable&) { out.push_back("driver unavailable"); },
      [&](const SpecjitError& e) { out.push_back(errc_name(e.code()).str()); },
      [&](const jit::CompileError&) { out.push_back("compile error"); },
      [&](const CudaError& e) { out.push_back("cuda " + e.api()); });
  return out;
}

} // namespace

TEST_CASE("a stored failure rebuilds every part with its type, as often as asked") {
  StoredFailure failure;
  CHECK(failure.empty());
  auto compile = std::make_unique<jit::CompileError>(
      "nvrtcCompileProgram", 6, "error: x", std::vector<std::string>{}, Arch{9, 0, true}, "k<1>");
  compile->set_context("kernel k variant k<1>:");
  llvm::Error original = llvm::joinErrors(
      llvm::joinErrors(make_error(Errc::strict_violation, "sealed"),
                       llvm::Error(std::move(compile))),
      llvm::joinErrors(llvm::make_error<CudaError>(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "oom"),
                       llvm::make_error<DriverUnavailable>("no libcuda")));
  original = failure.record(std::move(original));
  const std::vector<std::string> expected = {"strict mode violation", "compile error",
                                             "cuda cuMemAlloc", "driver unavailable"};
  CHECK(kinds(std::move(original)) == expected); // returned as it came
  for (int i = 0; i < 2; ++i) {
    llvm::Error again = failure.rebuild();
    std::string text;
    llvm::handleAllErrors(
        std::move(again),
        [&](const jit::CompileError& e) {
          text = e.message();
          CHECK(e.nvrtc_log() == "error: x");
          CHECK(e.name_expression() == "k<1>");
        },
        [](const llvm::ErrorInfoBase&) {});
    CHECK(text.find("kernel k variant k<1>:\nnvrtcCompileProgram failed") == 0);
    CHECK(kinds(failure.rebuild()) == expected);
  }
}

TEST_CASE("every caller of a variant that does not compile gets a CompileError, waiters too") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  KernelDef broken;
  broken.id = "broken_scale";
  broken.source = KernelSource::from_text(
      "broken.cu", "template <int N> __global__ void broken(int* y) { y[0] = undeclared(N); }");
  broken.function = "broken";
  broken.params = {ParamDef::user("n", Policy::exact())};
  auto id = engine.add_kernel(broken);
  REQUIRE(static_cast<bool>(id));
  // Eight threads at once: the first resolves the slot, the others (most runs) wait on it.
  std::vector<std::string> seen(8);
  std::vector<std::error_code> codes(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      auto variant = engine.prepare(*id, {4});
      if (variant) {
        seen[t] = "compiled";
        return;
      }
      llvm::Error error = variant.takeError();
      codes[t] = llvm::errorToErrorCode(llvm::handleErrors(
          std::move(error), [&](std::unique_ptr<jit::CompileError> e) -> llvm::Error {
            seen[t] = e->context().find("kernel broken_scale") == 0 ? "compile error" : "other";
            return llvm::Error(std::move(e));
          }));
    });
  for (std::thread& t : threads)
    t.join();
  for (size_t t = 0; t < seen.size(); ++t) {
    CHECK(seen[t] == "compile error");
    CHECK(codes[t] == Errc::compile_failed);
  }
  CHECK(engine.stats().failures == 8);
}

TEST_CASE("a strict refusal is a strict_violation for every caller, never unsupported") {
  TempDir dir;
  Engine engine(test::config_in(dir, {{"SPECJIT_STRICT", "error"}}));
  auto id = engine.add_kernel(scale_tokens_kernel(Policy::exact()));
  REQUIRE(static_cast<bool>(id));
  std::vector<std::error_code> codes(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < codes.size(); ++t)
    threads.emplace_back([&, t] {
      codes[t] = llvm::errorToErrorCode(engine.prepare(*id, {128, 62}).takeError());
    });
  for (std::thread& t : threads)
    t.join();
  for (const std::error_code& code : codes) {
    CHECK(code == Errc::strict_violation);
    CHECK(code != Errc::unsupported);
  }
}
