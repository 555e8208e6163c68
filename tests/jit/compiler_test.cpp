// Real NVRTC compiles; no GPU needed.
#include "jit/compiler.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <thread>

using namespace specjit;
using namespace specjit::jit;

namespace {

constexpr const char* k_scale_tokens = "specjit_kernels::scale_tokens<128, 0LL>";

CompileRequest scale_tokens_request(Arch arch) {
  return CompileRequest{"test/scale_tokens.cu", k_scale_tokens, {}, arch};
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

void check_compiled(const CompiledKernel& kernel) {
  REQUIRE(kernel.cubin.size() > 4);
  CHECK(kernel.cubin.compare(0, 4,
                             "\x7f"
                             "ELF") == 0);
  CHECK(llvm::StringRef(kernel.lowered_name).startswith("_Z"));
  CHECK(kernel.lowered_name.find("scale_tokens") != std::string::npos);
  CHECK(kernel.resources.registers > 0);
  CHECK(kernel.resources.spill_bytes() == 0);
  CHECK(kernel.compile_ms > 0);
  CHECK(kernel.log.find(kernel.lowered_name) != std::string::npos);
}

// Consumes `error`, which must be a CompileError, and hands it to `check`.
template <typename Check> void expect_compile_error(llvm::Error error, Check check) {
  bool seen = false;
  llvm::handleAllErrors(
      std::move(error),
      [&](const CompileError& e) {
        seen = true;
        check(e);
      },
      [&](const llvm::ErrorInfoBase& e) { FAIL("not a CompileError: " << e.message()); });
  CHECK(seen);
}

} // namespace

TEST_CASE("NVRTC reports its version") {
  NvrtcVersion version = nvrtc_version();
  CHECK(version.major >= 12);
  CHECK(version.name() == std::to_string(version.major) + "." + std::to_string(version.minor));
  CHECK(nvrtc_version() == version);
  MESSAGE("NVRTC " << version.name());
}

TEST_CASE("effective options start with the fixed ones, carry the arch and are deterministic") {
  CompileRequest request = scale_tokens_request(Arch{9, 0, true});
  request.options = {"-DSPECJIT_TEST=1", "--use_fast_math"};
  std::vector<std::string> options = effective_options(request);
  CHECK(options == effective_options(request));
  CHECK(contains(options, "--gpu-architecture=sm_90a"));
  CHECK(contains(options, "--ptxas-options=--verbose"));
  CHECK(options.front().rfind("--std=c++", 0) == 0);
  REQUIRE(options.size() >= 2);
  CHECK(options[options.size() - 2] == "-DSPECJIT_TEST=1");
  CHECK(options.back() == "--use_fast_math");
  // Fast math is the request's choice, never a default.
  CHECK_FALSE(
      contains(effective_options(scale_tokens_request(Arch{9, 0, true})), "--use_fast_math"));
  CHECK(contains(effective_options(scale_tokens_request(Arch{8, 0, false})),
                 "--gpu-architecture=sm_80"));
}

TEST_CASE("scale_tokens compiles to a cubin for sm_90a with a clean ptxas report") {
  llvm::Expected<CompiledKernel> kernel = compile(scale_tokens_request(Arch{9, 0, true}));
  REQUIRE_MESSAGE(kernel, llvm::toString(kernel.takeError()));
  check_compiled(*kernel);
  CHECK(kernel->log.find("for 'sm_90a'") != std::string::npos);
  CHECK(kernel->resources.warnings.empty());
  MESSAGE("sm_90a: " << kernel->compile_ms << " ms, " << kernel->resources.registers
                     << " registers, cubin " << kernel->cubin.size() << " bytes\n"
                     << kernel->log);
}

TEST_CASE("scale_tokens compiles for the portable sm_80 target") {
  llvm::Expected<CompiledKernel> kernel = compile(scale_tokens_request(Arch{8, 0, false}));
  REQUIRE_MESSAGE(kernel, llvm::toString(kernel.takeError()));
  check_compiled(*kernel);
  CHECK(kernel->log.find("for 'sm_80'") != std::string::npos);
  MESSAGE("sm_80: " << kernel->compile_ms << " ms");
}

TEST_CASE("request options reach NVRTC") {
  CompileRequest request = scale_tokens_request(Arch{9, 0, true});
  request.options = {"--maxrregcount=24"}; // scale_tokens uses 32 by default; 24 is ptxas' floor
  llvm::Expected<CompiledKernel> kernel = compile(request);
  REQUIRE_MESSAGE(kernel, llvm::toString(kernel.takeError()));
  CHECK(kernel->log.find("maxrregcount") != std::string::npos);
  CHECK(kernel->resources.registers <= 24);
}

TEST_CASE("a header included relative to the source's folder is found by NVRTC") {
  CompileRequest request{
      "test/relative_include.cu", "specjit_kernels::add_relative<2>", {}, Arch{9, 0, true}};
  llvm::Expected<CompiledKernel> kernel = compile(request);
  REQUIRE_MESSAGE(kernel, llvm::toString(kernel.takeError()));
  CHECK(kernel->cubin.compare(0, 4,
                              "\x7f"
                              "ELF") == 0);
}

TEST_CASE("a name expression that does not exist is a CompileError with NVRTC's log") {
  CompileRequest request = scale_tokens_request(Arch{9, 0, true});
  request.name_expression = "specjit_kernels::no_such_kernel<1>";
  llvm::Expected<CompiledKernel> kernel = compile(request);
  REQUIRE_FALSE(kernel);
  expect_compile_error(kernel.takeError(), [&](const CompileError& e) {
    CHECK(e.stage() == "nvrtcCompileProgram");
    CHECK(e.nvrtc_result() != 0);
    CHECK(e.nvrtc_log().find("no_such_kernel") != std::string::npos);
    CHECK(e.name_expression() == request.name_expression);
    CHECK(e.arch() == request.arch);
    CHECK(e.options() == effective_options(request));
    std::string message = e.message();
    CHECK(message.find("nvrtcCompileProgram failed") != std::string::npos);
    CHECK(message.find("no_such_kernel") != std::string::npos);
    CHECK(message.find("sm_90a") != std::string::npos);
  });
}

TEST_CASE("an option NVRTC does not know is a CompileError carrying the options") {
  CompileRequest request = scale_tokens_request(Arch{8, 9, false});
  request.options = {"--no-such-option"};
  llvm::Expected<CompiledKernel> kernel = compile(request);
  REQUIRE_FALSE(kernel);
  expect_compile_error(kernel.takeError(), [&](const CompileError& e) {
    CHECK(contains(e.options(), "--no-such-option"));
    CHECK(contains(e.options(), "--gpu-architecture=sm_89"));
    CHECK(!e.nvrtc_log().empty());
    CHECK(e.message().find("--no-such-option") != std::string::npos);
  });
}

TEST_CASE("include paths and architectures are refused in request options") {
  for (const char* option : {"-I/usr/local/cuda/include", "--include-path=/tmp",
                             "--gpu-architecture=sm_80", "-arch=sm_80"}) {
    CompileRequest request = scale_tokens_request(Arch{9, 0, true});
    request.options = {option};
    ErrorSummary error = summarize(compile(request).takeError());
    CHECK_MESSAGE(error.code == Errc::invalid_argument, option);
  }
}

TEST_CASE("an unknown source is a not_found error before NVRTC runs") {
  CompileRequest request = scale_tokens_request(Arch{9, 0, true});
  request.source = "test/missing.cu";
  ErrorSummary error = summarize(compile(request).takeError());
  CHECK(error.code == Errc::not_found);
  CHECK(error.message.find("test/missing.cu") != std::string::npos);
}

TEST_CASE("concurrent compiles give identical cubins") {
  std::vector<std::string> cubins(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cubins.size(); ++i)
    threads.emplace_back([&, i] {
      llvm::Expected<CompiledKernel> kernel = compile(scale_tokens_request(Arch{9, 0, true}));
      if (kernel)
        cubins[i] = kernel->cubin;
      else
        llvm::consumeError(kernel.takeError());
    });
  for (std::thread& thread : threads)
    thread.join();
  CHECK(!cubins[0].empty());
  CHECK(cubins[1] == cubins[0]);
  CHECK(cubins[2] == cubins[0]);
}

TEST_CASE("trim_log keeps the first lines and says how many were left out") {
  CHECK(trim_log("") == "");
  CHECK(trim_log("\n  \n") == "");
  CHECK(trim_log("one\ntwo\n") == "one\ntwo");
  CHECK(trim_log("1\n2\n3\n4\n5\n", 2) == "1\n2\n... (3 more lines)");
}
