// specjit_test_helper: a small program the tests start as separate processes, so that
// cross-process behaviour (disk hits in a second process, racing compiles, crashes) is tested
// with real processes. Configuration comes from the environment (SPECJIT_*), as in production.
//
//   specjit_test_helper prepare [--policy P] [--cols C] [--first A --last B] [--threads N]
//                               [--seal] [--each-thread] [--shuffle SEED] [--repeat R]
//                               [--reference DIR] [--write-reference DIR] [--start-file F]
//                               [--no-locks] [--short-writes] [--crash-at N] [--stop-in-write]
//     Makes scale_tokens<cols, num_tokens> ready for num_tokens in [A, B] (N threads share the
//     range round robin; with --each-thread every thread requests every value, in an order
//     shuffled per thread with --shuffle; the whole list R times) and prints the engine's
//     counters as one JSON object. Reliability options:
//       --reference DIR        compares every cubin handed out with DIR/<key>.cubin (a
//                              reference compile); counts corrupt_loads and unverified
//       --write-reference DIR  writes every cubin to DIR/<key>.cubin (makes the references)
//       --start-file F         waits until F exists before the first request (a start line
//                              for many processes)
//       --no-locks             every compile lock fails (ENOLCK, like NFS without locks)
//       --short-writes         every write(2) to a temp file transfers half of what is asked
//       --crash-at N           SIGKILLs itself at the N-th file operation counted from the
//                              creation of its first temp file (0: count only, report ops)
//       --stop-in-write        SIGSTOPs itself at its first write to a temp file (holding the
//                              compile lock and a half-written temp file)
//   specjit_test_helper key [--policy P] [--cols C] [--value V] [--options A,B,...]
//     Prints the disk key of one variant (hex), nothing else.
//   specjit_test_helper publish-loop --entry FILE --seconds S
//     Republishes the entry in FILE (any valid entry) into the cache root for S seconds.
//   specjit_test_helper read-loop --reference DIR --seconds S [--start-file F]
//     Looks up every key that DIR has a reference for, over and over, for S seconds, directly
//     through the disk store; compares every hit with its reference.
#include "runtime/engine.h"
#include "runtime/store_config.h"
#include "runtime/test_kernel.h"

#include "cache/disk_store.h"
#include "cache/file_io.h"
#include "reliability/same_compile.h"
#include "support/config.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
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
  bool each_thread = false;
  int64_t shuffle = -1;
  int repeat = 1;
  std::string reference;
  std::string write_reference;
  std::string start_file;
  bool no_locks = false;
  bool short_writes = false;
  int64_t crash_at = -1;
  bool stop_in_write = false;
  std::string extra_options;
  std::string entry;
  double seconds = 1;
};

bool parse(int argc, char** argv, Options& options) {
  if (argc < 2)
    return false;
  options.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    bool* toggle = flag == "--seal"            ? &options.seal
                   : flag == "--each-thread"   ? &options.each_thread
                   : flag == "--no-locks"      ? &options.no_locks
                   : flag == "--short-writes"  ? &options.short_writes
                   : flag == "--stop-in-write" ? &options.stop_in_write
                                               : nullptr;
    if (toggle) {
      *toggle = true;
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
    else if (flag == "--shuffle")
      options.shuffle = std::atoll(value.c_str());
    else if (flag == "--repeat")
      options.repeat = std::atoi(value.c_str());
    else if (flag == "--reference")
      options.reference = value;
    else if (flag == "--write-reference")
      options.write_reference = value;
    else if (flag == "--start-file")
      options.start_file = value;
    else if (flag == "--crash-at")
      options.crash_at = std::atoll(value.c_str());
    else if (flag == "--options")
      options.extra_options = value;
    else if (flag == "--entry")
      options.entry = value;
    else if (flag == "--seconds")
      options.seconds = std::atof(value.c_str());
    else
      return false;
  }
  return true;
}

int fail(const std::string& message) {
  llvm::errs() << "specjit_test_helper: " << message << "\n";
  return 1;
}

std::optional<std::string> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_bytes_atomically(const std::string& path, const std::string& bytes) {
  std::string temp = path + "." + std::to_string(::getpid()) + ".part";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::rename(temp.c_str(), path.c_str());
}

void wait_for_start(const std::string& start_file) {
  if (start_file.empty())
    return;
  struct stat st;
  while (::stat(start_file.c_str(), &st) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The injected faults of the reliability tests (cache/file_io.h is the one seam).
std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_ops{0};

void install_faults(const Options& options) {
  if (!options.no_locks && !options.short_writes && options.crash_at < 0 && !options.stop_in_write)
    return;
  cache::set_fault_injector([options](cache::IoOp op, llvm::StringRef path) -> int {
    bool temp = path.contains("/v1/tmp/") && path.endswith(".tmp");
    // Armed by the creation of a temp file (not by the start-up sweep's look at old ones).
    if (temp && op == cache::IoOp::open)
      g_armed.store(true);
    if (options.crash_at >= 0 && g_armed.load()) {
      int64_t n = g_ops.fetch_add(1) + 1;
      if (options.crash_at > 0 && n >= options.crash_at)
        ::raise(SIGKILL);
    }
    if (options.no_locks && op == cache::IoOp::lock)
      return ENOLCK;
    if (temp && op == cache::IoOp::write) {
      static std::atomic<bool> stopped{false};
      if (options.stop_in_write && !stopped.exchange(true))
        ::raise(SIGSTOP);
      if (options.short_writes)
        return cache::k_inject_short_write;
    }
    return 0;
  });
}

// Compares handed-out cubins with reference compiles; thread-safe.
class ReferenceCheck {
public:
  explicit ReferenceCheck(std::string dir) : m_dir(std::move(dir)) {}
  void check(const Digest128& key, llvm::StringRef cubin) {
    if (m_dir.empty())
      return;
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_references.find(key.hex());
    if (it == m_references.end()) {
      std::optional<std::string> bytes = read_bytes(m_dir + "/" + key.hex() + ".cubin");
      it = m_references.emplace(key.hex(), bytes).first;
    }
    if (!it->second) {
      ++unverified;
      return;
    }
    reliability::Sameness same = reliability::compare_compiles(cubin, *it->second);
    if (same == reliability::Sameness::different) {
      ++corrupt_loads;
      return;
    }
    ++verified;
    length_varied += same == reliability::Sameness::same_but_name_lengths;
  }
  int64_t verified = 0, unverified = 0, corrupt_loads = 0, length_varied = 0;

private:
  std::string m_dir;
  std::mutex m_mutex;
  std::map<std::string, std::optional<std::string>> m_references;
};

std::vector<int64_t> values_for(const Options& options, int thread) {
  std::vector<int64_t> values;
  int64_t step = options.each_thread ? 1 : options.threads;
  int64_t start = options.first + (options.each_thread ? 0 : thread);
  for (int64_t value = start; value <= options.last; value += step)
    values.push_back(value);
  if (options.shuffle >= 0) {
    std::mt19937_64 rng(static_cast<uint64_t>(options.shuffle) * 1000 + thread);
    std::shuffle(values.begin(), values.end(), rng);
  }
  std::vector<int64_t> all;
  for (int r = 0; r < options.repeat; ++r)
    all.insert(all.end(), values.begin(), values.end());
  return all;
}

int run_prepare(const Options& options, runtime::Engine& engine, runtime::KernelId kernel) {
  ReferenceCheck reference(options.reference);
  std::mutex errors_mutex;
  llvm::json::Array errors;
  std::atomic<int64_t> calls{0};
  wait_for_start(options.start_file);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.emplace_back([&, t] {
      for (int64_t value : values_for(options, t)) {
        calls.fetch_add(1);
        auto variant = engine.prepare(kernel, {options.cols, value});
        if (!variant) {
          std::lock_guard<std::mutex> lock(errors_mutex);
          errors.push_back(llvm::toString(variant.takeError()));
          continue;
        }
        reference.check((*variant)->key, (*variant)->cubin);
        if (!options.write_reference.empty())
          write_bytes_atomically(options.write_reference + "/" + (*variant)->key.hex() + ".cubin",
                                 (*variant)->cubin);
      }
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  runtime::EngineStats stats = engine.stats();
  bool ok = errors.empty();
  llvm::outs() << llvm::json::Value(llvm::json::Object{
                      {"requests", static_cast<int64_t>(stats.requests)},
                      {"calls", calls.load()},
                      {"memory_hits", static_cast<int64_t>(stats.memory_hits)},
                      {"disk_hits", static_cast<int64_t>(stats.disk_hits)},
                      {"remote_hits", static_cast<int64_t>(stats.remote_hits)},
                      {"compiles", static_cast<int64_t>(stats.compiles)},
                      {"failures", static_cast<int64_t>(stats.failures)},
                      {"corrupt_entries", static_cast<int64_t>(stats.corrupt_entries)},
                      {"write_failures", static_cast<int64_t>(stats.write_failures)},
                      {"storms", static_cast<int64_t>(stats.storms)},
                      {"disk_writable", engine.disk_writable()},
                      {"verified", reference.verified},
                      {"unverified", reference.unverified},
                      {"corrupt_loads", reference.corrupt_loads},
                      {"length_varied", reference.length_varied},
                      {"ops_counted", g_ops.load()},
                      {"ms", ms},
                      {"errors", std::move(errors)}})
               << "\n";
  return ok ? 0 : 1;
}

int run_publish_loop(const Options& options, const Config& config) {
  std::optional<std::string> bytes = read_bytes(options.entry);
  if (!bytes)
    return fail("cannot read " + options.entry);
  auto decoded = cache::decode_entry(*bytes, std::nullopt);
  if (!decoded)
    return fail(llvm::toString(decoded.takeError()));
  Digest128 key = decoded->key;
  std::string kernel = decoded->metadata.key_inputs.kernel;
  cache::DiskStore store(runtime::store_options(config));
  wait_for_start(options.start_file);
  int64_t publishes = 0, errors = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(options.seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (llvm::Error error = store.publish(key, kernel, *bytes)) {
      llvm::consumeError(std::move(error));
      ++errors;
    } else {
      ++publishes;
    }
  }
  llvm::outs() << llvm::json::Value(
                      llvm::json::Object{{"publishes", publishes}, {"errors", errors}})
               << "\n";
  return errors == 0 ? 0 : 1;
}

int run_read_loop(const Options& options, const Config& config) {
  std::vector<std::pair<Digest128, std::string>> references;
  if (DIR* dir = ::opendir(options.reference.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      llvm::StringRef name(entry->d_name);
      if (!name.consume_back(".cubin"))
        continue;
      auto key = Digest128::from_hex(name);
      auto bytes = read_bytes(options.reference + "/" + entry->d_name);
      if (key && bytes)
        references.emplace_back(*key, std::move(*bytes));
    }
    ::closedir(dir);
  }
  if (references.empty())
    return fail("no references in " + options.reference);
  cache::DiskStore store(runtime::store_options(config));
  wait_for_start(options.start_file);
  int64_t reads = 0, hits = 0, misses = 0, corrupt_loads = 0, short_reads = 0,
          checksum_failures = 0, other_faults = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(options.seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& [key, cubin] : references) {
      ++reads;
      cache::LookupResult result = store.lookup(key, "scale_tokens");
      for (const cache::CorruptFinding& finding : result.corrupt) {
        if (finding.fault == cache::EntryFault::truncated)
          ++short_reads;
        else if (finding.fault == cache::EntryFault::checksum_mismatch)
          ++checksum_failures;
        else
          ++other_faults;
      }
      if (!result.hit) {
        ++misses;
        continue;
      }
      ++hits;
      if (reliability::compare_compiles(result.hit->entry.cubin, cubin) ==
          reliability::Sameness::different)
        ++corrupt_loads;
    }
  }
  llvm::outs() << llvm::json::Value(llvm::json::Object{{"reads", reads},
                                                       {"hits", hits},
                                                       {"misses", misses},
                                                       {"corrupt_loads", corrupt_loads},
                                                       {"short_reads", short_reads},
                                                       {"checksum_failures", checksum_failures},
                                                       {"other_faults", other_faults}})
               << "\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options))
    return fail("usage: specjit_test_helper prepare|key|publish-loop|read-loop [--policy P] ...");
  auto config = Config::from_environment();
  if (!config)
    return fail(llvm::toString(config.takeError()));
  install_faults(options);
  if (options.command == "publish-loop")
    return run_publish_loop(options, *config);
  if (options.command == "read-loop")
    return run_read_loop(options, *config);

  auto policy = runtime::Policy::parse(options.policy);
  if (!policy)
    return fail(llvm::toString(policy.takeError()));
  runtime::KernelDef def = runtime::scale_tokens_kernel(*policy);
  if (!options.extra_options.empty()) {
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::StringRef(options.extra_options).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef part : parts)
      def.options.push_back(part.str());
  }
  runtime::Engine engine(*config);
  auto kernel = engine.add_kernel(def);
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
  return run_prepare(options, engine, *kernel);
}
