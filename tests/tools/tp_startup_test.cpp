// specjit-bench tp-startup --prepare-only: four real rank processes released at once on one
// empty cache root, compiling (NVRTC, no GPU) the inverse-RoPE variant and DeepSeek-V3 TP8's
// MoE variants at one token count, then a short trace; then the same on the warm root.
#include "test_support.h"

#include "runtime/driver.h"

#include <doctest/doctest.h>

#include <llvm/Support/MemoryBuffer.h>

#ifdef SPECJIT_BENCH

namespace {

using specjit::test::int_field;

int64_t stat(const llvm::json::Object& rank, llvm::StringRef name) {
  const llvm::json::Object* stats = rank.getObject("stats");
  REQUIRE(stats != nullptr);
  return int_field(*stats, name);
}

llvm::json::Object read_json(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  REQUIRE_MESSAGE(static_cast<bool>(buffer), "no report at " << path);
  auto value = llvm::json::parse((*buffer)->getBuffer());
  REQUIRE_MESSAGE(static_cast<bool>(value), "the report is not JSON");
  REQUIRE(value->getAsObject() != nullptr);
  return std::move(*value->getAsObject());
}

} // namespace

TEST_CASE("tp-startup --prepare-only: 4 ranks compile each key once between them; warm, none") {
  specjit::test::TempDir dir;
  specjit::test::ProcessResult run = specjit::test::run_process(
      {SPECJIT_BENCH, "tp-startup", "--prepare-only", "--ranks", "4", "--tokens", "1",
       "--trace-steps", "20", "--max-tokens", "4", "--json", dir / "tp.json"},
      {"SPECJIT_ARCH=sm_90a", "TMPDIR=" + dir.path()});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  MESSAGE("tp-startup table:\n" << run.out);
  llvm::json::Object report = read_json(dir / "tp.json");
  CHECK(report.getBoolean("root_was_empty") == true);
  const llvm::json::Array* runs = report.getArray("runs");
  REQUIRE(runs != nullptr);
  REQUIRE(runs->size() == 2);
  const llvm::json::Object& cold = *(*runs)[0].getAsObject();
  const llvm::json::Object& warm = *(*runs)[1].getAsObject();

  const int64_t keys = int_field(*cold.getObject("totals"), "distinct_keys_compiled");
  CHECK(keys > 1); // the inverse-RoPE variant and the MoE layer's
  CHECK(int_field(*cold.getObject("totals"), "compiles") == keys);
  CHECK(int_field(*cold.getObject("totals"), "compile_events") == keys);
  int64_t waits = 0, trace_compiles = 0, warmup_keys = 0;
  REQUIRE(cold.getArray("ranks")->size() == 4);
  for (const llvm::json::Value& value : *cold.getArray("ranks")) {
    const llvm::json::Object& rank = *value.getAsObject();
    CHECK(stat(rank, "compiles") + stat(rank, "disk_hits") == keys); // each key once, either way
    CHECK(stat(rank, "failures") == 0);
    const llvm::json::Object& ready = *rank.getObject("ready_stats");
    warmup_keys = int_field(ready, "compiles") + int_field(ready, "disk_hits");
    trace_compiles += int_field(rank, "trace_compiles");
    waits += stat(rank, "lock_waits");
    // Set up, then the barrier every rank leaves together, then the ready phase.
    const double setup = rank.getNumber("setup_ms").getValueOr(-1);
    CHECK(setup >= 0);
    CHECK(rank.getNumber("barrier_ms").getValueOr(-1) >= 0);
    CHECK(rank.getNumber("ready_start_ms").getValueOr(-1) >= setup);
  }
  CHECK(waits >= 1); // released at once, the ranks met at the first key's lock
  // On an H200, T = 2..4 in the trace is the built-in table's next bucket: its variants compiled
  // once, by the rank that got there first. Elsewhere the default rule's first bucket holds
  // T = 1..4, and the trace compiles nothing new.
  CHECK(warmup_keys <= keys);
  CHECK(trace_compiles == keys - warmup_keys);

  REQUIRE(warm.getArray("ranks")->size() == 4);
  CHECK(int_field(*warm.getObject("totals"), "compiles") == 0);
  for (const llvm::json::Value& value : *warm.getArray("ranks")) {
    const llvm::json::Object& rank = *value.getAsObject();
    CHECK(stat(rank, "compiles") == 0);
    CHECK(stat(rank, "disk_hits") == keys);
    CHECK(rank.getNumber("ready_ms").getValueOr(-1) >= 0);
  }
  CHECK(warm.getObject("checks")->getBoolean("zero_compiles") == true);
}

TEST_CASE("tp-startup names a bad flag value, and a missing GPU without --prepare-only") {
  specjit::test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ranks", "0"}, "--ranks takes a count from 1 to 256, not '0'"},
      {{"--kernels", "inv_rope,gemm"}, "--kernels takes inv_rope and/or moe"},
      {{"--tokens", "1,0"}, "--tokens takes token counts from 1 to 65536"},
      {{"--trace-steps", "x"}, "--trace-steps takes a count from 0 to 100000, not 'x'"},
      {{"--frobnicate"}, "unknown or incomplete flag '--frobnicate'"}};
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {SPECJIT_BENCH, "tp-startup", "--prepare-only"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    specjit::test::ProcessResult run = specjit::test::run_process(argv, {"TMPDIR=" + dir.path()});
    CHECK(run.exit_code == 2);
    CHECK_MESSAGE(run.err.find(message) != std::string::npos, run.err);
  }
  if (specjit::runtime::device_available())
    return;
  specjit::test::ProcessResult run = specjit::test::run_process(
      {SPECJIT_BENCH, "tp-startup", "--ranks", "2"}, {"TMPDIR=" + dir.path()});
  CHECK(run.exit_code == 2);
  CHECK_MESSAGE(run.err.find("needs a CUDA device (--prepare-only runs without one)") !=
                    std::string::npos,
                run.err);
}

#endif
