// specjit-bench moe: the fused MoE layer on the three reference shapes (KERNELS.md, "Fused
// MoE"), FP8 and bf16, T in {1, 4, 16, 64, 256, 1024, 4096}: GEMM-only µs (GEMM1 + GEMM2, the
// peer's measure) and whole-layer µs (routing, grouping, GEMMs, reduction), fraction of the
// memory floor (distinct experts' w13 + w2 bytes / 4.46 TB/s), TFLOP/s, next to vLLM's Triton
// figures. Timed as CUDA-graph replays of many launches (device events); successive launches
// rotate over k_weight_copies copies of the weights, so no launch finds its experts in the
// 50 MB L2 the previous one filled (the floor is an HBM floor). Each run first measures the
// machine's device-to-device copy rate and reports it (machines of one pool differ).
//   --tune   measures candidate tile configurations per token-count bucket and writes the
//            table (ops/moe/config.h) to --table-out (default
//            ops/moe/tables/moe-configs.json; after each bucket, so a run cut short keeps
//            the buckets it finished) and the swap-AB vs normal crossover (best of each orientation
//            per T) to
//            --crossover (default docs/bench/moe-crossover-h200.json)
//   --table  runs a tuned table file instead of the built-in one (ops/moe/builtin_table.h);
//            --no-table: the default rule
//   --tokens only some of the token counts (with --tune: a partial re-tune of the table)
//   --routings N  also GEMM µs averaged over N fresh random routings per token count, as the
//            peer's benchmark averages over a fresh routing per timed replay; the main figures
//            use one fixed routing (seed 42), which at small T may hit more or fewer experts
//            than the average
//   --tune-routings R  the tuner judges each candidate pair by its mean over R routings
// The run's state: moe_bench.h; the tuner's search: moe_tune.cpp; the device side (buffers,
// timing, precompilation): moe_harness.h; the tuner's candidates: moe_candidates.h.
#include "moe_bench.h"

#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <map>
#include <numeric>

namespace specjit::bench {

using namespace specjit::ops;

namespace {

// The token counts of --tokens (all of k_tokens when absent); false on a bad value.
bool parse_token_counts(const Flags& flags, std::vector<int64_t>& counts) {
  const std::string list = flags.get("--tokens", ""); // owns what `rest` points into
  for (llvm::StringRef rest = list; !rest.empty();) {
    auto [word, tail] = rest.split(',');
    rest = tail;
    int64_t value = 0;
    if (word.getAsInteger(10, value) ||
        std::find(std::begin(k_tokens), std::end(k_tokens), value) == std::end(k_tokens)) {
      llvm::errs() << "specjit-bench moe: --tokens: '" << word
                   << "' is not one of 1,4,16,64,256,1024,4096\n";
      return false;
    }
    counts.push_back(value);
  }
  if (counts.empty())
    counts.assign(std::begin(k_tokens), std::end(k_tokens));
  return true;
}

} // namespace

void MoeBench::prepare(const MoeShape& s) {
  std::vector<std::pair<int64_t, MoeTileConfig>> work;
  for (int64_t tokens : token_counts) {
    if (tune)
      for (const MoeCandidateBlock& block : moe_candidates(s, tokens, engine.arch(), weights()))
        for (const MoeTileConfig& c : moe_candidate_configs(block))
          for (const MoeTileConfig& form :
               both_read_forms() ? moe_read_forms(c) : std::vector<MoeTileConfig>{c})
            work.push_back({tokens, form});
    work.push_back(
        {tokens,
         must(resolve_moe_config(s, tokens, engine.device_facts(), table, weights()), "config")
             .config});
  }
  if (!work.empty())
    precompile(engine, s, work, weights(), packed_reads);
}

void MoeBench::measure(const Model& model, const MoeShape& s, const Buffers& b, int64_t tokens,
                       const TunedMoeOptions& options, const MoeTileConfig& chosen,
                       const PeerFigures* peer, size_t index) {
  const double layer_us = time_us(engine, drv, s, b, tokens, options, stream);
  TunedMoeOptions gemms = options;
  gemms.stages = moe_stage_gemm1 | moe_stage_gemm2;
  const double gemm_us = time_us(engine, drv, s, b, tokens, gemms, stream);
  // The same layer with GEMM2 in plain stream order (no programmatic launch), for the
  // launch-gap comparison.
  TunedMoeOptions plain = options;
  plain.programmatic_launch = false;
  const double layer_plain_us = time_us(engine, drv, s, b, tokens, plain, stream);
  plain.stages = moe_stage_gemm1 | moe_stage_gemm2;
  const double gemm_plain_us = time_us(engine, drv, s, b, tokens, plain, stream);
  // Each GEMM alone (plain stream order), to show where the GEMM time goes.
  plain.stages = moe_stage_gemm1;
  const double gemm1_us = time_us(engine, drv, s, b, tokens, plain, stream);
  plain.stages = moe_stage_gemm2;
  const double gemm2_us = time_us(engine, drv, s, b, tokens, plain, stream);
  const double eager_host_us = host_us(engine, drv, s, b, tokens, options, stream);
  const int64_t distinct = distinct_experts(drv, b, s, tokens);
  const double floor_us = floor_us_of(s, distinct);
  const double flops = 2.0 * tokens * s.top_k * 3.0 * s.intermediate * s.hidden;
  const double tflops = flops / (gemm_us * 1e-6) / 1e12;
  check_layer(engine, drv, s, b, tokens, options, stream);
  std::optional<llvm::json::Object> sampled;
  std::optional<double> mean_us;
  if (routings > 0) {
    sampled = measure_routings(s, b, tokens, gemms);
    mean_us = *sampled->getNumber("gemm_us_mean");
  }
  const PeerRatios ratios = peer ? peer_ratios(*peer, index, gemm_us, mean_us) : PeerRatios{};
  const double peer_fixed = ratios.fixed ? peer->fixed_us[index] : 0;
  llvm::outs() << fmt::format(
      "{:<16} {:>4} {:>5} {:>9.1f} {:>9.1f} {:>7.1f} {:>7.1f} {:>9.1f} {:>6.1f} {:>6.0f}% "
      "{:>8.1f} {:>9} {:>7}  {}\n",
      model.name, moe_dtype_name(s.dtype).str(), tokens, gemm_us, gemm_plain_us, gemm1_us, gemm2_us,
      layer_us, eager_host_us, 100.0 * floor_us / gemm_us, tflops,
      ratios.fixed ? fmt::format("{:.1f}", peer_fixed) : "-",
      ratios.fixed ? fmt::format("{:.2f}x", *ratios.fixed) : "-", chosen.describe());
  if (mean_us)
    print_routings(tokens, *sampled, ratios.mean ? peer->mean_us[index] : 0);
  llvm::outs().flush();
  llvm::json::Object row{{"model", model.name},
                         {"dtype", moe_dtype_name(s.dtype)},
                         {"tokens", tokens},
                         {"experts", s.experts},
                         {"top_k", s.top_k},
                         {"hidden", s.hidden},
                         {"intermediate", s.intermediate},
                         {"gemm_us", gemm_us},
                         {"layer_us", layer_us},
                         {"gemm_us_without_pdl", gemm_plain_us},
                         {"gemm1_alone_us", gemm1_us},
                         {"gemm2_alone_us", gemm2_us},
                         {"layer_us_without_pdl", layer_plain_us},
                         {"eager_host_us", eager_host_us},
                         {"distinct_experts", distinct},
                         {"floor_us", floor_us},
                         {"fraction_of_floor", floor_us / gemm_us},
                         {"tflops", tflops},
                         {"config", chosen.describe()}};
  if (ratios.fixed) {
    row["peer_gemm_us"] = peer_fixed; // on the fixed routing, as gemm_us
    row["speedup_vs_peer"] = *ratios.fixed;
  }
  if (sampled) {
    if (ratios.mean) {
      (*sampled)["peer_gemm_us_mean"] = peer->mean_us[index]; // over 20 routings
      (*sampled)["speedup_vs_peer"] = *ratios.mean;
    }
    row["routing_samples"] = std::move(*sampled);
  }
  rows.push_back(std::move(row));
}

llvm::json::Object MoeBench::measure_routings(const MoeShape& s, const Buffers& b, int64_t tokens,
                                              const TunedMoeOptions& gemms) {
  TunedMoeOptions layer = gemms;
  layer.stages = moe_stage_all;
  std::vector<double> us;
  std::vector<int64_t> distinct;
  for (int r = 1; r <= routings; ++r) {
    set_router_logits(drv, b, s, tokens, static_cast<uint32_t>(r));
    must(fused_moe(engine, s, tensors(b, s, tokens), layer, stream), "routing sample");
    distinct.push_back(distinct_experts(drv, b, s, tokens));
    us.push_back(time_us(engine, drv, s, b, tokens, gemms, stream));
  }
  set_router_logits(drv, b, s, max_tokens, k_routing_seed);
  must(fused_moe(engine, s, tensors(b, s, tokens), layer, stream), "fixed routing");
  const double gemm_mean = std::accumulate(us.begin(), us.end(), 0.0) / routings;
  const double distinct_mean = std::accumulate(distinct.begin(), distinct.end(), 0.0) / routings;
  const double floor_mean = floor_us_of(s, distinct_mean);
  const auto [lo, hi] = std::minmax_element(us.begin(), us.end());
  llvm::json::Object result{{"samples", routings},
                            {"seeds", fmt::format("1..{}", routings)},
                            {"gemm_us_mean", gemm_mean},
                            {"gemm_us_min", *lo},
                            {"gemm_us_max", *hi},
                            {"distinct_experts_mean", distinct_mean},
                            {"floor_us_mean", floor_mean},
                            {"fraction_of_floor", floor_mean / gemm_mean},
                            {"gemm_us", llvm::json::Array(us)},
                            {"distinct_experts", llvm::json::Array(distinct)}};
  return result;
}

void MoeBench::print_routings(int64_t tokens, const llvm::json::Object& r, double peer_mean) {
  const double mean = *r.getNumber("gemm_us_mean");
  llvm::outs() << fmt::format(
      "{:<16} {:>4} {:>5} {:>9.1f} mean over {} routings ({:.1f}..{:.1f}), {:.1f} experts, "
      "floor {:.0f}%{}\n",
      "", "", tokens, mean, routings, *r.getNumber("gemm_us_min"), *r.getNumber("gemm_us_max"),
      *r.getNumber("distinct_experts_mean"), 100.0 * *r.getNumber("fraction_of_floor"),
      peer_mean > 0 ? fmt::format(", peer {:.1f} (mean over {} routings), {:.2f}x", peer_mean,
                                  k_peer_mean_routings, peer_mean / mean)
                    : "");
}

void MoeBench::run_shape(const Model& model, MoeDType dtype) {
  MoeShape s = model.shape;
  s.dtype = dtype;
  Setup setup = make_setup(drv, s, 4096);
  max_tokens = setup.max_tokens;
  if (packed)
    pack_weights(engine, drv, s, *setup.buffers);
  // --packed tunes the shape's packed entry, which starts from the row-major one if it has none;
  // the entry is this device's. A partial tune replaces only the buckets it measures; a device
  // without an entry starts from the default rule's buckets, so that the entry serves every
  // token count at every point of the tune.
  const runtime::DeviceFacts& device = engine.device_facts();
  MoeConfigEntry entry{s, device.arch, {}, weights(), device.name};
  if (const MoeConfigEntry* base = table ? table->find(s, device, weights()) : nullptr)
    entry.buckets = base->buckets;
  else
    for (int64_t bound : default_moe_buckets())
      entry.buckets.push_back({bound, default_moe_config(s, bound, device)});
  prepare(s);
  for (size_t i = 0; i < std::size(k_tokens); ++i) {
    const int64_t tokens = k_tokens[i];
    if (!selected(tokens))
      continue;
    TunedMoeOptions options;
    options.table = table;
    set_choices(options);
    MoeTileConfig chosen =
        must(resolve_moe_config(s, tokens, device, options.table, weights()), "config").config;
    if (tune) {
      chosen = tune_bucket(model, s, *setup.buffers, tokens, chosen);
      auto at = std::find_if(entry.buckets.begin(), entry.buckets.end(),
                             [&](const MoeConfigBucket& b) { return b.max_tokens >= tokens; });
      if (at != entry.buckets.end() && at->max_tokens == tokens)
        at->config = chosen;
      else
        entry.buckets.insert(at, {tokens, chosen});
      options.config = chosen;
      store_tuned(entry);
    }
    measure(model, s, *setup.buffers, tokens, options, chosen,
            dtype == MoeDType::fp8 && peer_device ? &model.peer : nullptr, i);
  }
}

void MoeBench::store_tuned(const MoeConfigEntry& entry) {
  auto same =
      std::find_if(tuned.entries.begin(), tuned.entries.end(), [&](const MoeConfigEntry& e) {
        return e.shape == entry.shape && e.arch == entry.arch && e.weights == entry.weights &&
               e.device == entry.device;
      });
  if (same != tuned.entries.end())
    *same = entry;
  else
    tuned.entries.push_back(entry);
  // A failure is reported here; the write at the end decides the exit status.
  save_tuned_table();
}

namespace {

// The value of flag `name`, one of `choices` (the first is the default); false, with a message
// naming the choices, for any other.
template <class E>
bool parse_choice(const Flags& flags, const std::string& name,
                  const std::vector<std::pair<std::string, E>>& choices, E& value) {
  const std::string given = flags.get(name, choices.front().first);
  for (const auto& [text, choice] : choices)
    if (text == given) {
      value = choice;
      return true;
    }
  std::string names;
  for (size_t i = 0; i < choices.size(); ++i)
    names += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i].first;
  llvm::errs() << "specjit-bench moe: " << name << " takes " << names << ", not '" << given
               << "'\n";
  return false;
}

} // namespace

int run_moe_bench(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, 2,
                   {"--json", "--table", "--table-out", "--crossover", "--models", "--dtypes",
                    "--tokens", "--handoff", "--launch-order", "--routings", "--tune-routings",
                    "--tune-sustain-ms", "--packed-reads"},
                   {"--help", "--tune", "--verbose", "--packed", "--no-table"}, flags))
    return 2;
  if (flags.has("--help")) {
    llvm::outs()
        << "usage: specjit-bench moe [--json PATH] [--table PATH | --no-table] [--tune "
           "[--table-out PATH] [--verbose]] [--models qwen3,mixtral,deepseek] [--dtypes fp8,bf16]\n"
           "                         [--tokens 1,4,...] [--handoff automatic|always|never]\n"
           "                         [--launch-order automatic|grouped|block-major]\n"
           "                         [--routings N] [--tune-routings R] [--tune-sustain-ms MS]\n"
           "                         [--packed [--packed-reads automatic|bulk|map]]\n"
           "  --table    the tuned table to run and to start --tune from (default: the built-in\n"
           "             one, ops/moe/tables/moe-configs.json as built); --no-table: the "
           "default rule\n"
           "  --tokens   only these of the token counts 1,4,16,64,256,1024,4096; with --tune,\n"
           "             the table's other buckets are kept as they are\n"
           "  --verbose  with --tune, every candidate's GEMM us on stderr\n"
           "  --table-out  with --tune, where the table goes, written after each bucket\n"
           "  --handoff  GEMM2 takes each token block once GEMM1 has written it: FP8 from 32\n"
           "             tokens an expert on (automatic), always, or never\n"
           "  --launch-order  the wgmma GEMMs' CTAs take 8 token blocks per weight tile (grouped)\n"
           "             or each block's tiles in turn (block-major); automatic: block-major for\n"
           "             FP8 with the hand-off and at most 8 experts of at most one block each\n"
           "  --routings N  also each T's GEMM us averaged over N fresh random routings (seeds\n"
           "             1..N), next to the fixed routing (seed 42) of the main figures\n"
           "  --tune-routings R  with --tune, each candidate pair is judged by its mean GEMM us\n"
           "             over the fixed routing and R - 1 fresh ones (seeds 1001..; default 1: "
           "the\n"
           "             fixed one)\n"
           "  --tune-sustain-ms MS  with --tune, MS of untimed replays before each candidate's\n"
           "             timed ones: judged at the clock the GPU holds under sustained load\n"
           "             (the H200 caps its clock at FP8 prefill; default 0)\n"
           "  --packed   the weights packed by moe_pack_weights instead of row-major, with the\n"
           "             table's packed entries where it has them (--tune writes them, timing\n"
           "             each wgmma tile reading by bulk copies and through a tensor map);\n"
           "             --packed-reads: every tile by bulk copies or through the map\n"
           "             (automatic: as the table's tile says, else bulk copies for the swap-AB\n"
           "             tiles without f16 tokens)\n"
           "  --models   also mix16, ds512 (mix32, ds1k4): Mixtral and DeepSeek with two (four)\n"
           "             times the experts and top-k: the same tokens an expert over two (four)\n"
           "             times the weights; no peer figures\n";
    return 0;
  }
  std::vector<int64_t> token_counts;
  if (!parse_token_counts(flags, token_counts))
    return 2;
  MoeHandoff handoff = MoeHandoff::automatic;
  MoeLaunchOrder launch_order = MoeLaunchOrder::automatic;
  if (!parse_choice<MoeHandoff>(flags, "--handoff",
                                {{"automatic", MoeHandoff::automatic},
                                 {"always", MoeHandoff::always},
                                 {"never", MoeHandoff::never}},
                                handoff) ||
      !parse_choice<MoeLaunchOrder>(flags, "--launch-order",
                                    {{"automatic", MoeLaunchOrder::automatic},
                                     {"grouped", MoeLaunchOrder::grouped},
                                     {"block-major", MoeLaunchOrder::block_major}},
                                    launch_order))
    return 2;
  int64_t routings = 0, tune_routings = 1, tune_sustain_ms = 0;
  if (!parse_count(flags, "moe", "--routings", 0, 1000, 0, routings) ||
      !parse_count(flags, "moe", "--tune-routings", 1, 100, 1, tune_routings) ||
      !parse_count(flags, "moe", "--tune-sustain-ms", 0, 5000, 0, tune_sustain_ms))
    return 2;
  MoePackedReads packed_reads = MoePackedReads::automatic;
  std::vector<std::pair<std::string, MoePackedReads>> reads_choices; // the tables' names
  for (MoePackedReads r :
       {MoePackedReads::automatic, MoePackedReads::bulk, MoePackedReads::tensor_map})
    reads_choices.push_back({moe_packed_reads_name(r).str(), r});
  if (!parse_choice(flags, "--packed-reads", reads_choices, packed_reads))
    return 2;
  const bool table_file = !flags.get("--table", "").empty(); // a value flag: has() is for switches
  const bool use_table = !flags.has("--no-table");
  if (table_file && !use_table) {
    llvm::errs() << "specjit-bench moe: --table and --no-table exclude each other\n";
    return 2;
  }
  MoeConfigTable table = use_table ? builtin_moe_config_table() : MoeConfigTable{};
  if (table_file) {
    auto buffer =
        must(llvm::errorOrToExpected(llvm::MemoryBuffer::getFile(flags.get("--table", ""))),
             "read table");
    table = must(parse_moe_config_table(buffer->getBuffer()), "parse table");
  }
  auto config = must(Config::from_environment(), "config");
  if (flags.has("--tune"))
    configure_for_tuning(config);
  runtime::Engine engine(config);
  must(engine.make_context_current(), "device");
  const runtime::Driver& drv = must(runtime::driver(), "driver");
  CUstream stream = nullptr;
  must(drv.check(drv.cuStreamCreate(&stream, 0), "cuStreamCreate"), "stream");

  MoeBench bench{engine,
                 drv,
                 stream,
                 use_table ? &table : nullptr,
                 flags.has("--tune"),
                 flags.has("--verbose"),
                 token_counts,
                 {},
                 {},
                 table,
                 handoff,
                 launch_order,
                 static_cast<int>(routings),
                 static_cast<int>(tune_routings)};
  bench.tune_sustain_ms = static_cast<int>(tune_sustain_ms);
  bench.packed = flags.has("--packed");
  bench.table_out = flags.get("--table-out", "ops/moe/tables/moe-configs.json");
  bench.packed_reads = packed_reads;
  const double copy_rate = device_copy_bytes_per_s(drv);
  llvm::outs() << fmt::format("device-to-device copy of 1 GiB: {:.2f} TB/s read + written (the "
                              "floor assumes {:.2f} TB/s of reads)\n",
                              copy_rate * 1e-12, k_stream_bytes_per_s * 1e-12);
  const std::string models = flags.get("--models", "qwen3,mixtral,deepseek");
  const std::string dtypes = flags.get("--dtypes", "fp8,bf16");
  const std::string device = engine.device_facts().name;
  bench.peer_device = device == k_peer_device;
  if (bench.peer_device)
    llvm::outs() << fmt::format("peer (FP8 only): {}, measured {}; peer_us and x_peer on the "
                                "fixed routing ({}), the routings' lines against the peer's mean "
                                "over {} routings\n",
                                k_peer_method, k_peer_date, k_peer_fixed_routing,
                                k_peer_mean_routings);
  else
    llvm::outs() << fmt::format("peer: its figures were measured on an {}, not on this '{}': "
                                "no peer_us or x_peer (compare runs on this GPU with each other)\n",
                                k_peer_device, device);
  llvm::outs() << fmt::format(
      "{:<16} {:>4} {:>5} {:>9} {:>9} {:>7} {:>7} {:>9} {:>6} {:>7} {:>8} {:>9} {:>7}  {}\n",
      "model", "dt", "T", "gemm_us", "no_pdl", "g1", "g2", "layer_us", "host", "floor%", "TFLOP/s",
      "peer_us", "x_peer", "config");
  for (const Model& model : k_models) {
    if (models.find(std::string(model.name).substr(0, 5)) == std::string::npos)
      continue;
    for (MoeDType dtype : {MoeDType::fp8, MoeDType::bf16})
      if (dtypes.find(moe_dtype_name(dtype).str()) != std::string::npos)
        bench.run_shape(model, dtype);
  }
  if (bench.tune && !bench.write_tuned(flags))
    return 1;
  const std::string path = flags.get("--json", "docs/bench/moe-h200.json");
  return write_report(path,
                      llvm::json::Object{
                          {"kernel", "fused_moe"},
                          {"timing", "CUDA graph replay, device events, median"},
                          {"memory_floor_bytes_per_s", k_stream_bytes_per_s},
                          {"measured_copy_bytes_per_s", copy_rate},
                          {"peer",
                           llvm::json::Object{
                               {"method", k_peer_method},
                               {"compared", bench.peer_device}, // else the rows have no ratios
                               {"date", k_peer_date},
                               {"routing", k_peer_fixed_routing},
                               {"mean_routings", k_peer_mean_routings},
                               {"ratios", "peer_gemm_us / gemm_us on the fixed routing; "
                                          "routing_samples: peer_gemm_us_mean / gemm_us_mean"}}},
                          {"data", k_moe_data},
                          {"tuned", bench.tune},
                          {"weights", moe_weight_layout_name(bench.weights())},
                          {"rows", std::move(bench.rows)}})
             ? 0
             : 1;
}

} // namespace specjit::bench
