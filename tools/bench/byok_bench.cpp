// specjit-bench byok: a kernel brought at run time with its own header tree (the CuTe kernel of
// examples/cute/cute_scale.cu against CUTLASS): its compile time, then the disk-ready time of a
// fresh engine per variant, header check included (direct mode), with this user's stat hints
// and without them (a copied tree, a lost hint file), and where the check's time goes.
// No GPU: prepare() only.
#include "bench_common.h"

#include "examples/cute/cute_scale.h"
#include "runtime/engine.h"
#include "runtime/header_deps.h"
#include "runtime/store_config.h"

#include "cache/deps_manifest.h"
#include "cache/stat_hints.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

namespace specjit::bench {

namespace {

// The definition digest of the (only) manifest under <root>/v1/deps.
Digest128 only_definition(const std::string& root) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root + "/v1/deps", ec), end; it != end && !ec;
       it.increment(ec))
    if (auto digest = Digest128::from_hex(llvm::sys::path::stem(it->path())))
      return *digest;
  fail("header check", llvm::createStringError(std::make_error_code(std::errc::io_error),
                                               "no dependency manifest under %s", root.c_str()));
}

// The include directories as the engine searches them: the source's folder, then the
// definition's, each resolved to its real path.
std::vector<std::string> engine_include_dirs(const std::string& source,
                                             const runtime::KernelDef& def) {
  std::vector<std::string> dirs;
  llvm::SmallString<256> folder(source);
  llvm::sys::path::remove_filename(folder);
  std::vector<std::string> given = {folder.empty() ? "." : folder.str().str()};
  given.insert(given.end(), def.include_dirs.begin(), def.include_dirs.end());
  for (const std::string& dir : given) {
    llvm::SmallString<256> real;
    dirs.push_back(llvm::sys::fs::real_path(dir, real) ? dir : real.str().str());
  }
  return dirs;
}

struct CheckBreakdown {
  double manifest_us = 0, hints_us = 0, hinted_us = 0, hashed_us = 0;
  runtime::HeaderReader::Counts hinted, hashed;
};

// The pieces of the first variant's header check, each the median of `rounds`.
CheckBreakdown time_check(const Config& config, const std::vector<std::string>& dirs,
                          int64_t rounds) {
  cache::DiskStore store(runtime::store_options(config));
  const Digest128 definition = only_definition(config.cache_root());
  std::vector<double> manifest, hints_read, hinted, hashed;
  CheckBreakdown result;
  for (int64_t i = 0; i < rounds; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::vector<cache::DependencySet> sets = cache::read_dependency_sets(store, definition);
    manifest.push_back(seconds_since(start) * 1e6);
    if (sets.empty())
      fail("header check", llvm::createStringError(std::make_error_code(std::errc::io_error),
                                                   "the dependency manifest does not decode"));
    start = std::chrono::steady_clock::now();
    cache::StatHints hints = cache::read_stat_hints(store, definition);
    hints_read.push_back(seconds_since(start) * 1e6);
    start = std::chrono::steady_clock::now();
    runtime::HeaderReader with_hints(dirs, {&hints, runtime::HintUse::lookup});
    bool held = !runtime::check_dependency_set(sets[0], with_hints);
    hinted.push_back(seconds_since(start) * 1e6);
    start = std::chrono::steady_clock::now();
    runtime::HeaderReader without(dirs);
    held &= !runtime::check_dependency_set(sets[0], without);
    hashed.push_back(seconds_since(start) * 1e6);
    if (!held)
      fail("header check", llvm::createStringError(std::make_error_code(std::errc::io_error),
                                                   "the stored dependency set does not hold"));
    result.hinted = with_hints.counts();
    result.hashed = without.counts();
  }
  result.manifest_us = median(manifest);
  result.hints_us = median(hints_read);
  result.hinted_us = median(hinted);
  result.hashed_us = median(hashed);
  return result;
}

struct FreshEngines {
  std::vector<double> ready_us, define_us, first_us, later_us;
  runtime::EngineStats last;
};

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
  // dependency manifest and checks every listed header, from stat hints or by re-hashing it,
  // then loads), the others (load only). Without hints, the hint files go before each engine.
  const std::string hints_dir = config.cache_root() + "/v1/hints";
  auto fresh_engines = [&](bool keep_hints) {
    FreshEngines result;
    for (int64_t i = 0; i < engines; ++i) {
      if (!keep_hints)
        (void)llvm::sys::fs::remove_directories(hints_dir);
      runtime::Engine engine(config);
      auto start = std::chrono::steady_clock::now();
      runtime::KernelId id =
          must(engine.add_kernel(examples::cute_scale_kernel(config, source, cutlass)), "define");
      result.define_us.push_back(seconds_since(start) * 1e6);
      for (size_t t = 0; t < tiles.size(); ++t) {
        auto variant_start = std::chrono::steady_clock::now();
        must(engine.prepare(id, {128, tiles[t]}), "disk load");
        (t == 0 ? result.first_us : result.later_us).push_back(seconds_since(variant_start) * 1e6);
      }
      result.ready_us.push_back(seconds_since(start) * 1e6 / static_cast<double>(tiles.size()));
      result.last = engine.stats();
      if (result.last.compiles != 0)
        fail("disk load", llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                                  "a fresh engine compiled instead of loading"));
    }
    return result;
  };
  FreshEngines unhinted = fresh_engines(false); // each writes the hints back
  FreshEngines hinted = fresh_engines(true);
  const std::vector<std::string> dirs =
      engine_include_dirs(source, examples::cute_scale_kernel(config, source, cutlass));
  const CheckBreakdown check = time_check(config, dirs, engines);
  const double ready = median(hinted.ready_us);
  const int64_t headers = static_cast<int64_t>(check.hashed.hashed);
  llvm::outs() << llvm::format("CuTe kernel compile: %.2f s (median of %zu variants)\n",
                               median(compile_s), tiles.size())
               << llvm::format("fresh-engine disk-ready: %.1f us per variant (median of %lld "
                               "engines, define + header check + load)\n",
                               ready, static_cast<long long>(engines))
               << llvm::format("  define %.1f us, first variant (header check + load) %.1f us, "
                               "each later variant %.1f us\n",
                               median(hinted.define_us), median(hinted.first_us),
                               median(hinted.later_us))
               << llvm::format("  headers checked: %lld (%llu from stat hints, %llu hashed)\n",
                               static_cast<long long>(headers),
                               static_cast<unsigned long long>(hinted.last.headers_from_hints),
                               static_cast<unsigned long long>(hinted.last.headers_hashed))
               << llvm::format("without stat hints: %.1f us per variant, first variant %.1f us "
                               "(%llu headers hashed)\n",
                               median(unhinted.ready_us), median(unhinted.first_us),
                               static_cast<unsigned long long>(unhinted.last.headers_hashed))
               << llvm::format("header check alone: manifest %.1f us, hint file %.1f us, headers "
                               "with hints %.1f us (%llu stats), without %.1f us\n",
                               check.manifest_us, check.hints_us, check.hinted_us,
                               static_cast<unsigned long long>(check.hinted.probes),
                               check.hashed_us);
  std::string json = flags.get("--json", "");
  if (json.empty())
    return 0;
  llvm::json::Array compiles;
  for (double s : compile_s)
    compiles.push_back(s);
  return write_report(
             json,
             llvm::json::Object{
                 {"compile_s", std::move(compiles)},
                 {"ready_us_per_variant", ready},
                 {"define_us", median(hinted.define_us)},
                 {"first_variant_us", median(hinted.first_us)},
                 {"later_variant_us", median(hinted.later_us)},
                 {"engines", engines},
                 {"headers_checked", headers},
                 {"headers_from_hints", hinted.last.headers_from_hints},
                 {"without_hints",
                  llvm::json::Object{{"ready_us_per_variant", median(unhinted.ready_us)},
                                     {"first_variant_us", median(unhinted.first_us)},
                                     {"headers_hashed", unhinted.last.headers_hashed}}},
                 {"check_us", llvm::json::Object{{"manifest", check.manifest_us},
                                                 {"hint_file", check.hints_us},
                                                 {"headers_with_hints", check.hinted_us},
                                                 {"headers_without_hints", check.hashed_us},
                                                 {"stats_with_hints", check.hinted.probes}}}})
             ? 0
             : 1;
}

} // namespace specjit::bench
