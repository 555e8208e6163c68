// specjit-bench digest: runs the built-in ops on seeded random data and prints an XXH3-128
// digest of every output tensor, one line each, so that two builds of the library (before and
// after a change that must keep the kernels' outputs byte for byte) can be run on one GPU and
// their outputs compared with diff:
//   <op> <model> <dtype> <case> T=<tokens> <tensor> <32 hex digits>
// Each case runs twice, its outputs filled with different bytes before each run: a digest that
// differs between the two runs (an output left unwritten, or a result that varies from run to
// run) is printed as "unstable" and fails the run, as does any error.
#include "bench_data.h"
#include "digest.h"

#include "support/hash.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace specjit::bench {

std::string device_digest(const runtime::Driver& drv, CUdeviceptr ptr, size_t bytes) {
  must(drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize"), "digest");
  std::string host(bytes, '\0');
  must(drv.check(drv.cuMemcpyDtoH(host.data(), ptr, bytes), "cuMemcpyDtoH"), "digest");
  return hash128(host).hex();
}

void run_case(const runtime::Driver& drv, const std::string& prefix,
              const std::vector<Output>& outputs, const std::function<llvm::Error()>& run,
              Tally& tally) {
  std::vector<std::string> first;
  for (unsigned char fill : {0x00, 0xA5}) {
    for (const Output& o : outputs)
      must(drv.check(drv.cuMemsetD8(o.ptr, fill, o.bytes), "cuMemsetD8"), "fill");
    // The op runs on a stream that does not wait for the legacy stream's memsets.
    must(drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize"), "fill");
    if (llvm::Error err = run()) {
      std::printf("%s error %s\n", prefix.c_str(), llvm::toString(std::move(err)).c_str());
      ++tally.failures;
      return;
    }
    std::vector<std::string> digests;
    for (const Output& o : outputs)
      digests.push_back(device_digest(drv, o.ptr, o.bytes));
    if (first.empty()) {
      first = std::move(digests);
      continue;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const bool stable = digests[i] == first[i];
      std::printf("%s %s %s\n", prefix.c_str(), outputs[i].name,
                  stable ? first[i].c_str() : "unstable");
      tally.failures += stable ? 0 : 1;
      ++tally.lines;
    }
  }
  std::fflush(stdout);
}

namespace {

using runtime::DType;

void digest_inv_rope(runtime::Engine& engine, const runtime::Driver& drv, int64_t groups,
                     int64_t heads_per_group, const std::vector<int64_t>& token_counts,
                     CUstream stream, Tally& tally) {
  constexpr int64_t k_max_pos = 8192;
  const int64_t heads = groups * heads_per_group;
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  const int64_t max_padded = (max_tokens + 3) / 4 * 4;
  DeviceBuffer o(drv, max_tokens * heads * 512 * 2), positions(drv, max_tokens * 8),
      cos_sin(drv, k_max_pos * 64 * 4), out(drv, max_tokens * heads * 512),
      scales(drv, heads * 4 * max_padded * 4);
  const RandomTensor host_o = random_tensor(1, max_tokens * heads * 512, false, 1.0f, 1);
  o.upload(host_o.bytes.data(), host_o.bytes.size());
  std::vector<float> host_cos_sin(k_max_pos * 64);
  for (size_t i = 0; i < host_cos_sin.size(); ++i)
    host_cos_sin[i] = 0.5f + 0.5f * std::fabs(std::tanh(random_normal(2, i)));
  cos_sin.upload(host_cos_sin.data(), host_cos_sin.size() * 4);
  std::vector<int64_t> host_positions(max_tokens);
  std::mt19937 generator(3);
  for (int64_t& p : host_positions)
    p = generator() % k_max_pos;
  positions.upload(host_positions.data(), host_positions.size() * 8);
  ops::InvRopeFp8QuantOptions options;
  options.num_groups = groups;
  options.heads_per_group = heads_per_group;
  for (int64_t tokens : token_counts) {
    const int64_t padded = (tokens + 3) / 4 * 4;
    const runtime::TensorRef o_ref{o.ptr, DType::bf16, {tokens, heads, 512}, {}};
    const runtime::TensorRef positions_ref{positions.ptr, DType::i64, {tokens}, {}};
    const runtime::TensorRef cos_sin_ref{cos_sin.ptr, DType::f32, {k_max_pos, 64}, {}};
    const runtime::TensorRef out_ref{
        out.ptr, DType::e4m3, {groups, tokens, heads_per_group * 512}, {}};
    const runtime::TensorRef scales_ref{
        scales.ptr, DType::f32, {groups, heads_per_group * 4, padded}, {}};
    run_case(
        drv, fmt::format("inv-rope g{}x{} bf16 default T={}", groups, heads_per_group, tokens),
        {{"out_fp8", out.ptr, static_cast<size_t>(groups * tokens * heads_per_group * 512)},
         {"out_scales", scales.ptr, static_cast<size_t>(heads * 4 * padded * 4)}},
        [&] {
          return ops::inv_rope_fp8_quant(engine, o_ref, positions_ref, cos_sin_ref, out_ref,
                                         scales_ref, options, stream);
        },
        tally);
  }
}

std::vector<int64_t> parse_list(const std::string& text, bool& ok) {
  std::vector<int64_t> values;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(text).split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    int64_t value = 0;
    if (part.trim().getAsInteger(10, value) || value < 1 || value > 65536) {
      ok = false;
      return {};
    }
    values.push_back(value);
  }
  ok = !values.empty();
  return values;
}

} // namespace

int run_digest(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2, {"--op", "--models", "--dtypes", "--tokens", "--cases"},
                   {"--help"}, flags))
    return 2;
  if (flags.has("--help")) {
    std::printf(
        "usage: specjit-bench digest [--op moe|inv-rope|all] [--models a,b] [--dtypes fp8,bf16]\n"
        "                            [--tokens 1,4,...] [--cases table,packed,...]\n"
        "  runs the built-in ops on seeded random data and prints an XXH3-128 digest of every\n"
        "  output tensor, one line each; run two builds and diff their outputs. Defaults: both\n"
        "  ops, the three reference models, fp8 and bf16, T = 1 4 16 64 256 1024 4096 (moe) and\n"
        "  1 3 16 128 1024 4096 (inv-rope), every case. Exit 1 on an error or an unstable "
        "digest.\n");
    return 0;
  }
  const std::string op = flags.get("--op", "all");
  if (op != "all" && op != "moe" && op != "inv-rope") {
    llvm::errs() << "specjit-bench digest: --op must be moe, inv-rope or all, got '" << op << "'\n";
    return 2;
  }
  bool ok = true;
  std::vector<int64_t> moe_tokens = {1, 4, 16, 64, 256, 1024, 4096};
  std::vector<int64_t> rope_tokens = {1, 3, 16, 128, 1024, 4096};
  if (const std::string list = flags.get("--tokens", ""); !list.empty()) {
    moe_tokens = rope_tokens = parse_list(list, ok);
    if (!ok) {
      llvm::errs() << "specjit-bench digest: --tokens takes a comma-separated list of counts in "
                      "[1, 65536]\n";
      return 2;
    }
  }
  auto names = [&](const char* flag) {
    std::vector<std::string> out;
    const std::string value = flags.get(flag, ""); // owns what `parts` points into
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(value).split(parts, ',', -1, false);
    for (llvm::StringRef part : parts)
      out.push_back(part.trim().str());
    return out;
  };
  const std::vector<std::string> model_names = names("--models"), case_names = names("--cases");
  std::vector<std::string> dtype_names = names("--dtypes");
  if (dtype_names.empty())
    dtype_names = {"fp8", "bf16"};
  for (const std::string& d : dtype_names)
    if (d != "fp8" && d != "bf16") {
      llvm::errs() << "specjit-bench digest: --dtypes takes fp8 and bf16, got '" << d << "'\n";
      return 2;
    }
  for (const std::string& c : case_names) {
    bool known = false;
    for (const std::string& name : moe_case_names())
      known |= c == name;
    if (!known) {
      llvm::errs() << "specjit-bench digest: unknown case '" << c << "'\n";
      return 2;
    }
  }
  std::vector<const Model*> models;
  for (const Model& m : k_models) {
    const bool reference = m.peer.fixed_us[0] > 0; // the scaled shapes carry no peer figures
    if (model_names.empty()
            ? reference
            : std::find(model_names.begin(), model_names.end(), m.name) != model_names.end())
      models.push_back(&m);
  }
  if (models.size() < (model_names.empty() ? 1 : model_names.size())) {
    llvm::errs() << "specjit-bench digest: unknown model in --models\n";
    return 2;
  }
  if (!runtime::device_available()) {
    llvm::errs() << "specjit-bench digest: needs a CUDA device\n";
    return 1;
  }
  auto config = must(Config::from_environment(), "config");
  runtime::Engine engine(config);
  must(engine.make_context_current(), "context");
  const runtime::Driver& drv = *runtime::driver();
  CUstream stream = nullptr;
  must(drv.check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"), "stream");
  Tally tally;
  if (op != "inv-rope")
    for (const Model* model : models)
      for (const std::string& d : dtype_names)
        digest_moe(engine, drv, *model, d == "fp8" ? ops::MoeDType::fp8 : ops::MoeDType::bf16,
                   moe_tokens, case_names, stream, tally);
  if (op != "moe") {
    digest_inv_rope(engine, drv, 8, 16, rope_tokens, stream, tally);
    digest_inv_rope(engine, drv, 1, 4, rope_tokens, stream, tally);
  }
  drv.cuStreamDestroy(stream);
  std::fprintf(stderr, "specjit-bench digest: %d digests, %d failures\n", tally.lines,
               tally.failures);
  return tally.failures == 0 ? 0 : 1;
}

} // namespace specjit::bench
