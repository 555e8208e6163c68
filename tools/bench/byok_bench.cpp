// specjit-bench byok: a kernel brought at run time with its own header tree (the CuTe kernel of
// examples/cute/cute_scale.cu against CUTLASS): its compile time, then the disk-ready time of a
// fresh engine per variant, header check included (direct mode), and how many headers it checks.
// No GPU: prepare() only.
#include "bench_common.h"

#include "examples/cute/cute_scale.h"
#include "runtime/engine.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

namespace specjit::bench {

namespace {

// Headers in the newest dependency set of the (only) manifest under <root>/v1/deps.
int64_t headers_checked(const std::string& root) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root + "/v1/deps", ec), end; it != end && !ec;
       it.increment(ec)) {
    auto file = llvm::MemoryBuffer::getFile(it->path());
    if (!file)
      continue;
    llvm::StringRef body = (*file)->getBuffer().split('\n').second;
    llvm::Expected<llvm::json::Value> json = llvm::json::parse(body);
    if (!json) {
      llvm::consumeError(json.takeError());
      continue;
    }
    const llvm::json::Object* object = json->getAsObject();
    const llvm::json::Array* sets = object ? object->getArray("sets") : nullptr;
    if (sets && !sets->empty() && (*sets)[0].getAsArray())
      return static_cast<int64_t>((*sets)[0].getAsArray()->size());
  }
  return -1;
}

} // namespace

int run_byok_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--json", "--source", "--cutlass-include", "--engines"}, {},
                   flags))
    return 2;
  int64_t engines = 0;
  if (!parse_count(flags, "byok", "--engines", 1, 1000, 20, engines))
    return 2;
  Config config = must(Config::from_environment(), "config");
  std::string cutlass = flags.get("--cutlass-include", config.cutlass_include);
  std::string source = flags.get("--source", "examples/cute/cute_scale.cu");
  if (cutlass.empty() || !llvm::sys::fs::exists(cutlass + "/cute/tensor.hpp")) {
    llvm::errs() << "specjit-bench byok: no CUTLASS include tree: pass --cutlass-include or set "
                    "SPECJIT_CUTLASS_INCLUDE (pip install nvidia-cutlass)\n";
    return 2;
  }
  ScratchDir scratch("specjit-byok-bench");
  config.cache_dir.set(scratch.path() + "/cache", SettingSource::cli_flag);
  config.arch.set(must(Arch::parse("sm_90a"), "arch"), SettingSource::cli_flag);
  const std::vector<int64_t> tiles = {8, 16, 32};
  std::vector<double> compile_s;
  {
    runtime::Engine engine(config);
    runtime::KernelId id = must(engine.add_kernel(examples::cute_scale_kernel(config, source, cutlass)), "define");
    for (int64_t tile : tiles) {
      auto start = std::chrono::steady_clock::now();
      must(engine.prepare(id, {128, tile}), "compile");
      compile_s.push_back(seconds_since(start));
    }
  }
  // Per fresh engine: the definition (reads the source), the first variant (reads the
  // dependency manifest and re-hashes every listed header, then loads), the others (load only).
  std::vector<double> ready_us, define_us, first_us, later_us;
  for (int64_t i = 0; i < engines; ++i) {
    runtime::Engine engine(config);
    auto start = std::chrono::steady_clock::now();
    runtime::KernelId id = must(engine.add_kernel(examples::cute_scale_kernel(config, source, cutlass)), "define");
    define_us.push_back(seconds_since(start) * 1e6);
    for (size_t t = 0; t < tiles.size(); ++t) {
      auto variant_start = std::chrono::steady_clock::now();
      must(engine.prepare(id, {128, tiles[t]}), "disk load");
      (t == 0 ? first_us : later_us).push_back(seconds_since(variant_start) * 1e6);
    }
    ready_us.push_back(seconds_since(start) * 1e6 / static_cast<double>(tiles.size()));
    if (engine.stats().compiles != 0)
      fail("disk load", llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                                "a fresh engine compiled instead of loading"));
  }
  const double ready = median(ready_us);
  const int64_t headers = headers_checked(config.cache_root());
  llvm::outs() << llvm::format("CuTe kernel compile: %.2f s (median of %zu variants)\n",
                               median(compile_s), tiles.size())
               << llvm::format("fresh-engine disk-ready: %.1f us per variant (median of %lld "
                               "engines, define + header check + load)\n",
                               ready, static_cast<long long>(engines))
               << llvm::format("  define %.1f us, first variant (header check + load) %.1f us, "
                               "each later variant %.1f us\n",
                               median(define_us), median(first_us), median(later_us))
               << "headers checked: " << headers << "\n";
  std::string json = flags.get("--json", "");
  if (json.empty())
    return 0;
  llvm::json::Array compiles;
  for (double s : compile_s)
    compiles.push_back(s);
  return write_report(json,
                      llvm::json::Object{{"compile_s", std::move(compiles)},
                                         {"ready_us_per_variant", ready},
                                         {"define_us", median(define_us)},
                                         {"first_variant_us", median(first_us)},
                                         {"later_variant_us", median(later_us)},
                                         {"engines", engines},
                                         {"headers_checked", headers}})
             ? 0
             : 1;
}

} // namespace specjit::bench
