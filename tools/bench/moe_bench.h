// specjit-bench moe's run (moe_bench.cpp: the flags, the measurements and the report;
// moe_tune.cpp: --tune's search and its outputs): the device, the options the flags chose, and
// what the run reports.
#pragma once

#include "bench_common.h"
#include "moe_candidates.h"
#include "moe_harness.h"
#include "moe_models.h"

#include "ops/moe/fused_moe.h"
#include "ops/moe/tuning.h"
#include "runtime/driver.h"
#include "runtime/engine.h"

#include <llvm/Support/JSON.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace specjit::bench {

// The read rate the weight-streaming floor assumes (bytes / s).
inline constexpr double k_stream_bytes_per_s = 4.46e12;

// One benchmark run: the device, the options from the flags, and what it reports.
struct MoeBench {
  runtime::Engine& engine;
  const runtime::Driver& drv;
  CUstream stream;
  const ops::MoeConfigTable* table; // --table, else the built-in one; nullptr: --no-table
  bool tune;
  bool verbose; // --verbose: every candidate's time while tuning, on stderr
  std::vector<int64_t> token_counts;
  llvm::json::Array rows, crossover;
  ops::MoeConfigTable tuned; // --tune: starts as `table`; the shapes not run keep their entries
  ops::MoeHandoff handoff = ops::MoeHandoff::automatic;              // --handoff
  ops::MoeLaunchOrder launch_order = ops::MoeLaunchOrder::automatic; // --launch-order
  int routings = 0;                                                  // --routings
  int tune_routings = 1;                                             // --tune-routings
  int tune_sustain_ms = 0;                                           // --tune-sustain-ms
  int64_t max_tokens = 0; // rows of the router logits (make_setup's)
  bool packed = false;    // --packed: the weights in moe_pack_weights' layout
  ops::MoePackedReads packed_reads = ops::MoePackedReads::automatic; // --packed-reads
  std::string table_out = {}; // --tune: where the tuned table goes (--table-out)
  bool peer_device = false;   // the GPU is the one the peer's figures were measured on

  // The flags' choices for every fused_moe call of the run.
  void set_choices(ops::TunedMoeOptions& o) const {
    o.handoff = handoff;
    o.launch_order = launch_order;
    o.packed_reads = packed_reads;
  }

  ops::MoeWeightLayout weights() const {
    return packed ? ops::MoeWeightLayout::packed : ops::MoeWeightLayout::row_major;
  }

  // A tune on packed weights with no --packed-reads times each wgmma tile in both read forms.
  bool both_read_forms() const { return packed && packed_reads == ops::MoePackedReads::automatic; }

  bool selected(int64_t tokens) const {
    return std::find(token_counts.begin(), token_counts.end(), tokens) != token_counts.end();
  }

  // Compiles every configuration this shape's run will launch, on all cores (a tune on packed
  // weights: each wgmma tile in both read forms, as time_alone times them).
  void prepare(const ops::MoeShape& s);

  // A candidate the device or the compiler rejects: reported, then skipped (never fatal).
  static void report_failed(const ops::MoeTileConfig& config, int64_t tokens, llvm::Error err);

  // Median µs of `config` running `stages` at `tokens`, or nothing when the device rejects the
  // configuration (reported and skipped, never fatal). One whole layer runs first: the GEMMs
  // read the grouping of the configuration's block_m, and GEMM2 GEMM1's output.
  std::optional<double> time_config(const ops::MoeShape& s, const Buffers& b, int64_t tokens,
                                    const ops::MoeTileConfig& config, unsigned stages,
                                    bool programmatic);

  // `block`'s tiles of GEMM `gemm`, each timed alone (plain stream order), fastest first; tiles
  // whose variant spills or has a wgmma diagnostic are left out (moe_gemm_compiles_clean). On
  // packed weights (--packed without --packed-reads) each wgmma tile is timed reading them by
  // bulk copies and through the map, and ranked in its faster form (the table's "reads").
  std::vector<ops::GemmTile> time_alone(const ops::MoeShape& s, const Buffers& b, int64_t tokens,
                                        const MoeCandidateBlock& block, int gemm);

  // GEMM µs of the pair `c` at `tokens`: on the fixed routing, or with --tune-routings R the
  // mean over it and R - 1 fresh ones (seeds k_tune_seed0 + 1 ..), so that a block size that only
  // fits the fixed routing's largest expert does not win (an expert past the block takes a
  // second block and reads its weights twice). Seeds apart from --routings' 1..N, so that a
  // table is not measured on the routings it was tuned on. The fixed routing is back in place
  // afterwards.
  std::optional<double> pair_us(const ops::MoeShape& s, const Buffers& b, int64_t tokens,
                                const ops::MoeTileConfig& c);

  // Tunes the bucket of `tokens` (GEMM-only time, moe_candidates.h): per block size each GEMM's
  // tiles alone, then together the pairs moe_tune_pairs picks from them and `chosen` (the rule's
  // or the table's configuration), each pair by pair_us. Returns the fastest pair and records
  // the best of each family in the crossover report.
  ops::MoeTileConfig tune_bucket(const Model& model, const ops::MoeShape& s, const Buffers& b,
                                 int64_t tokens, ops::MoeTileConfig chosen);

  // The layer and its GEMMs with `options`, with and without PDL, each GEMM alone; checks the
  // layer's output against the CPU reference (check_layer); prints the row and records it.
  // peer: vLLM's figures (nullptr: none), at k_tokens[index]; each set against the same routing.
  void measure(const Model& model, const ops::MoeShape& s, const Buffers& b, int64_t tokens,
               const ops::TunedMoeOptions& options, const ops::MoeTileConfig& chosen,
               const PeerFigures* peer, size_t index);

  // The weight-streaming floor of `distinct` experts (a mean over routings too: the floor is
  // linear in it): their w13 + w2 bytes at 4.46 TB/s.
  static double floor_us_of(const ops::MoeShape& s, double distinct) {
    const double expert_bytes =
        (3.0 * s.intermediate * s.hidden) * (s.dtype == ops::MoeDType::fp8 ? 1 : 2);
    return distinct * expert_bytes / k_stream_bytes_per_s * 1e6;
  }

  // GEMM µs (`gemms`: GEMM1 + GEMM2 as the row's figure) over `routings` fresh routings of
  // `tokens` tokens (seeds 1..routings), each routed by one whole layer call and then timed like
  // the row; returns their mean, spread and mean floor. The fixed routing's logits are put back
  // afterwards, so every other row stays on them.
  llvm::json::Object measure_routings(const ops::MoeShape& s, const Buffers& b, int64_t tokens,
                                      const ops::TunedMoeOptions& gemms);

  // The line of measure_routings' result `r`, against the peer's mean (0: none).
  void print_routings(int64_t tokens, const llvm::json::Object& r, double peer_mean);

  // Every selected token count of one model and dtype; --tune records the shape's entry.
  void run_shape(const Model& model, ops::MoeDType dtype);

  // --tune: `entry` into the tuned table (replacing the one of its shape, layout and device) and
  // the table to --table-out, after every bucket, so that a tune cut short keeps what it tuned.
  void store_tuned(const ops::MoeConfigEntry& entry);

  // --tune's table, to --table-out: through a temporary file renamed over it, so that a run
  // stopped while writing leaves the previous table whole.
  bool save_tuned_table() const;

  // --tune's outputs at the end: the table, and the crossover report.
  bool write_tuned(const Flags& flags);
};

} // namespace specjit::bench
