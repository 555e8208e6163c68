// specjit_test_helper: a small program the tests start as separate processes, so that
// cross-process behaviour (disk hits in a second process, racing compiles, crashes) is tested
// with real processes. Configuration comes from the environment (SPECJIT_*), as in production.
//
//   specjit_test_helper prepare [--policy P] [--cols C] [--first A --last B] [--threads N]
//                               [--seal] [--launch]
//     Makes scale_tokens<cols, num_tokens> ready for num_tokens in [A, B] (N threads share the
//     range, round robin) and prints the engine's counters as one JSON object.
//   specjit_test_helper key [--policy P] [--cols C] [--value V]
//     Prints the disk key of one variant (hex), nothing else.
#include "runtime/builtin_kernels.h"
#include "runtime/engine.h"

#include "support/config.h"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace specjit;

namespace {

struct Options {
  std::string command;
  std::string policy = "dynamic";
  int64_t cols = 128;
  int64_t first = 1;
  int64_t last = 1;
  int threads = 1;
  bool seal = false;
};

bool parse(int argc, char** argv, Options& options) {
  if (argc < 2)
    return false;
  options.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--seal") {
      options.seal = true;
      continue;
    }
    if (i + 1 >= argc)
      return false;
    std::string value = argv[++i];
    if (flag == "--policy")
      options.policy = value;
    else if (flag == "--cols")
      options.cols = std::atoll(value.c_str());
    else if (flag == "--first")
      options.first = std::atoll(value.c_str());
    else if (flag == "--last")
      options.last = std::atoll(value.c_str());
    else if (flag == "--value")
      options.first = options.last = std::atoll(value.c_str());
    else if (flag == "--threads")
      options.threads = std::atoi(value.c_str());
    else
      return false;
  }
  return true;
}

int fail(const std::string& message) {
  llvm::errs() << "specjit_test_helper: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options))
    return fail("usage: specjit_test_helper prepare|key [--policy P] [--cols C] ...");
  auto config = Config::from_environment();
  if (!config)
    return fail(llvm::toString(config.takeError()));
  auto policy = runtime::Policy::parse(options.policy);
  if (!policy)
    return fail(llvm::toString(policy.takeError()));
  runtime::Engine engine(*config);
  auto kernel = engine.add_kernel(runtime::scale_tokens_kernel(*policy));
  if (!kernel)
    return fail(llvm::toString(kernel.takeError()));
  if (options.seal)
    engine.seal();

  if (options.command == "key") {
    auto variant = engine.prepare(*kernel, {options.cols, options.first});
    if (!variant)
      return fail(llvm::toString(variant.takeError()));
    llvm::outs() << (*variant)->key.hex() << "\n";
    return 0;
  }
  if (options.command != "prepare")
    return fail("unknown command " + options.command);

  std::mutex errors_mutex;
  llvm::json::Array errors;
  std::vector<std::thread> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.emplace_back([&, t] {
      for (int64_t value = options.first + t; value <= options.last; value += options.threads) {
        auto variant = engine.prepare(*kernel, {options.cols, value});
        if (!variant) {
          std::lock_guard<std::mutex> lock(errors_mutex);
          errors.push_back(llvm::toString(variant.takeError()));
        }
      }
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  runtime::EngineStats stats = engine.stats();
  bool ok = errors.empty();
  llvm::outs() << llvm::json::Value(llvm::json::Object{
                      {"requests", static_cast<int64_t>(stats.requests)},
                      {"memory_hits", static_cast<int64_t>(stats.memory_hits)},
                      {"disk_hits", static_cast<int64_t>(stats.disk_hits)},
                      {"compiles", static_cast<int64_t>(stats.compiles)},
                      {"failures", static_cast<int64_t>(stats.failures)},
                      {"corrupt_entries", static_cast<int64_t>(stats.corrupt_entries)},
                      {"write_failures", static_cast<int64_t>(stats.write_failures)},
                      {"storms", static_cast<int64_t>(stats.storms)},
                      {"disk_writable", engine.disk_writable()},
                      {"errors", std::move(errors)}})
               << "\n";
  return ok ? 0 : 1;
}
