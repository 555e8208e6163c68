// Tile configurations of the fused MoE layer, as data (../../docs/moe.md, "Tile configurations").
//
// A table maps (experts, intermediate, hidden, top_k, dtype, arch) to token-count buckets, each
// with one configuration: the block size the grouping pads to (BLOCK_M, shared by both GEMMs)
// and per GEMM the kernel (mma.sync on any arch, or Hopper wgmma in the normal or the swap-AB
// orientation), the tile width BLOCK_N, the warp grid and the pipeline depth (BLOCK_K is fixed
// at 128 bytes of K: 128 e4m3 or 64 bf16 values). The op maps num_tokens to its bucket with the
// `bucketed` policy over the table's bounds; the bucket's configuration values become exact
// template arguments, so each configuration is one compiled variant and num_tokens stays a
// run-time argument. Without a matching table entry default_moe_config() decides.
//
// JSON (written by `specjit-bench moe --tune`, read by parse_moe_config_table):
//   {"version": 1, "entries": [{"experts": 128, "intermediate": 768, "hidden": 2048, "top_k": 8,
//     "dtype": "fp8", "arch": "sm_90a", "buckets": [{"max_tokens": 16, "block_m": 16,
//     "gemm1": {"block_n": 64, "warps_m": 1, "warps_n": 4, "stages": 4}, "gemm2": {...}}]}]}
//   A wgmma tile instead: {"kernel": "wgmma", "swap_ab": true, "block_n": 128, "warpgroups": 1,
//   "stages": 6} ("kernel" absent means mma; optional "split_k" and "tiles", default 1,
//   "stream_k", "dynamic" and "f16_tokens", default false, and in an entry with "weights":
//   "packed", "reads": "bulk" or "map").
// Token counts above the last bucket's max_tokens use the last bucket.
#pragma once

#include "kernels_src/moe/gemm_args.h"
#include "runtime/device_facts.h"
#include "support/arch.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specjit::ops {

enum class MoeDType : uint8_t { fp8, bf16 };
llvm::StringRef moe_dtype_name(MoeDType dtype); // "fp8", "bf16"

// One MoE layer's sizes (per tensor-parallel shard: intermediate is I / tp).
struct MoeShape {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t hidden = 0;       // H: GEMM1's K, GEMM2's N
  int64_t intermediate = 0; // I: GEMM1 produces 2I (gate, up), GEMM2's K
  MoeDType dtype = MoeDType::fp8;

  friend bool operator==(const MoeShape&, const MoeShape&) = default;
};

// How FP8 GEMM1 accumulates (FusedMoeOptions::accumulation). e4m3: the tiles marked e4m3 (the
// prefill buckets of the built-in table) run e4m3 MMAs promoted into fp32 once a stage; against
// the layer's float64 truth they are as accurate as exact (docs/moe.md, "Accumulation"). exact:
// every tile converts its e4m3 operands to f16 (exactly) for f16 MMAs, whose intermediate matches
// the re-quantizing reference bit for bit.
enum class MoeAccumulation : uint8_t { e4m3, exact };
llvm::StringRef moe_accumulation_name(MoeAccumulation accumulation); // "e4m3", "exact"
std::optional<MoeAccumulation> parse_moe_accumulation(llvm::StringRef name);

enum class MoeGemmKernel : uint8_t {
  mma,   // kernels_src/moe/gemm.cu: mma.sync, any arch
  wgmma, // kernels_src/moe/gemm_wgmma.cu: sm_90a only
};
llvm::StringRef moe_gemm_kernel_name(MoeGemmKernel kernel); // "mma", "wgmma"

// How a wgmma GEMM's CTAs share the work (fixed, stream_k, dynamic): the kernels' own enumeration
// (kernels_src/moe/gemm_args.h), a template argument of the wgmma GEMM variants.
using MoeSchedule = specjit_kernels::MoeSchedule;

// How a wgmma tile reads packed weights (MoeWeightLayout::packed): by bulk copies or through a
// rank-4 tensor map; automatic: bulk copies for the swap-AB tiles without f16 tokens (decode),
// the map elsewhere (moe_detail::packed_bulk_reads; docs/moe.md, "Packed weights"). A table's
// packed entry may name it per tile ("reads": "bulk" or "map"), as `--tune --packed` measures
// it; MoeTuning::packed_reads overrides both (tests, benchmarks).
enum class MoePackedReads { automatic, bulk, tensor_map };
// Its name in a table and in GemmTile::describe: "automatic", "bulk", "map".
llvm::StringRef moe_packed_reads_name(MoePackedReads reads);

// One GEMM's tile. block_n counts weight rows per tile (GEMM1: gate and up rows together, so
// block_n / 2 output columns).
//   mma    block_m x block_n tile on a warps_m x warps_n warp grid.
//   wgmma  normal orientation (swap_ab false): block_m = 64 * warpgroups token rows, block_n in
//          {64, 128, 256}. swap_ab: 64 output columns per CTA (block_n = 64; GEMM1 128, or 64
//          for 32 output columns per CTA, gate and up rows packed into one MMA),
//          block_m tokens in {8, 16, 32, 64, 128, 256}, warpgroups (1 or 2, with an even stage
//          count) splitting K; split_k (1, 2, 4, 8) CTAs of one thread-block cluster splitting
//          K further (each takes K / split_k; the first sums the others' partials through
//          distributed shared memory and writes the outputs): more CTAs streaming weights when
//          few experts are hit.
//          tiles: consecutive weight tiles per CTA through one pipeline (one setup and fill for
//          them; fewer, longer CTAs when K is a few stages only). Normal: 1 to 64, whole tiles
//          of the outputs; swap_ab: 1, 2, 4, 8 with one warpgroup, no split_k, not packed.
//          schedule stream_k (swap_ab, one warpgroup, no split_k, one tile, not packed,
//          block_m <= 32): instead of one CTA per (token block, tile), as many CTAs as fit on
//          the GPU at once, each streaming an equal share of all (token block, tile, K stage)
//          steps; tiles split between CTAs add their partial sums through the workspace. No wave
//          tails, one setup and pipeline fill per CTA. dynamic (the same tile rules, any
//          block_m): the resident CTAs take whole tiles from a counter.
//          f16_tokens (FP8 GEMM1, swap_ab, no split_k, block_m <= 128, fixed schedule with tiles
//          1 to 64, or dynamic): the tokens are read from a copy converted to f16 once per call
//          (moe_tokens_f16; for top_k <= 2 in the slots' sorted order, loaded by TMA boxes
//          instead of gathered), not converted by every CTA; the warpgroups split the output
//          columns (block_n = 128 x warpgroups: 64 columns each, their gate and up rows) instead of
//          K. For many tokens an expert, where every CTA of an expert would convert the same
//          tokens.
//          e4m3 (FP8 GEMM1, wgmma, not with f16_tokens; swap-AB: block_m <= 128, <= 64 with two
//          warpgroups): e4m3 MMAs on the stage's bytes, promoted into fp32 once a stage, at twice
//          the rate of the f16 MMAs the exact accumulation runs (FusedMoeOptions::accumulation).
//          whole_k (GEMM1 with e4m3, or FP8 wgmma GEMM2): the e4m3 MMAs accumulate over all of K
//          in place, unpromoted, as the peer's tl.dot does on sm_90: no partial sums, one group
//          of MMAs in flight; FP8 GEMM2 in the normal orientation may then be 256 wide. The
//          `exact` accumulation runs GEMM2 promoted (a 256-wide tile as 128 wide).
//          sorted_tokens (with e4m3, normal orientation, top_k <= 2, block_m <= 128): the token
//          rows from an e4m3 copy in the slots' sorted order, made once a call (moe_tokens_f16
//          SORTED 2), one TMA box a stage instead of gathering them.
struct GemmTile {
  int block_n = 64;
  int warps_m = 1;
  int warps_n = 4;
  int stages = 4;
  MoeGemmKernel kernel = MoeGemmKernel::mma;
  bool swap_ab = false;
  int warpgroups = 1;
  int split_k = 1;
  int tiles = 1;
  MoeSchedule schedule = MoeSchedule::fixed;
  bool f16_tokens = false;
  MoePackedReads packed_reads = MoePackedReads::automatic; // wgmma, packed weights only
  bool e4m3 = false;
  bool whole_k = false;
  bool sorted_tokens = false;
  friend bool operator==(const GemmTile&, const GemmTile&) = default;

  bool stream_k() const { return schedule == MoeSchedule::stream_k; }
  bool dynamic() const { return schedule == MoeSchedule::dynamic; }
  bool persistent() const { return schedule != MoeSchedule::fixed; }

  // A wgmma tile (the mma fields keep their defaults).
  static GemmTile wgmma_tile(int block_n, int stages, bool swap_ab, int warpgroups, int split_k = 1,
                             int tiles = 1);

  // "n64 w1x4 s4", "wgmma-swap n128 g1 s6", "... s8 k4", "... t4", "... sk" (stream_k), "... dyn",
  // "... f16" (f16_tokens), "... sorted" (sorted_tokens), "... e4m3", "... e4m3w" (whole_k)
  std::string describe() const;
  // Threads per CTA of GEMM `gemm` (1 or 2). wgmma: 128 per consumer warpgroup and the producer
  // warps: four for GEMM1 in the normal orientation (it gathers 64 token rows per warpgroup and
  // stage) or with f16 tokens (256 bytes a row and stage), one otherwise.
  unsigned threads(int gemm) const;
};

struct MoeTileConfig {
  int block_m = 16;
  GemmTile gemm1, gemm2;
  friend bool operator==(const MoeTileConfig&, const MoeTileConfig&) = default;
  std::string describe() const; // "m16 g1[n64 w1x4 s4] g2[wgmma-swap n64 g1 s8]"
};

struct MoeConfigBucket {
  int64_t max_tokens = 0;
  MoeTileConfig config;
};

// How a layer's weights lie in memory (FusedMoeTensors::weight_layout, ops/moe/fused_moe.h):
// row-major, or packed by moe_pack_weights.
enum class MoeWeightLayout { row_major, packed };
llvm::StringRef moe_weight_layout_name(MoeWeightLayout layout); // "row_major", "packed"
// The layout of that name; nullopt for any other.
std::optional<MoeWeightLayout> parse_moe_weight_layout(llvm::StringRef name);
// The packed layout's pieces: k_moe_piece_rows rows x 128 bytes of K (moe_pack_weights).
inline constexpr int64_t k_moe_piece_rows = 32;
// Whether GEMM `gemm` (1 or 2) with `tile` can read packed weights: only wgmma tiles do, and a
// stage's box (GEMM1: each of its gate and up halves) must hold whole pieces.
inline bool moe_tile_reads_packed(int gemm, const GemmTile& tile) {
  return tile.kernel == MoeGemmKernel::wgmma &&
         tile.block_n / (gemm == 1 ? 2 : 1) % k_moe_piece_rows == 0;
}

struct MoeConfigEntry {
  MoeShape shape;
  Arch arch;
  std::vector<MoeConfigBucket> buckets; // ascending max_tokens
  // The weights the entry was tuned on (JSON "weights", default row_major): a table may hold an
  // entry of each layout for a shape.
  MoeWeightLayout weights = MoeWeightLayout::row_major;
  // The device the entry was tuned on and serves (JSON "device", the driver's name, e.g.
  // "NVIDIA H200"); empty: every device of the arch.
  std::string device;
};

struct MoeConfigTable {
  std::vector<MoeConfigEntry> entries;
  // The entry for (shape, target, weights): the target's arch, and its device name where the
  // entry names one (an entry of the device before one of any device); for packed weights
  // without one of their own, the row-major entry (its tiles read packed weights too).
  const MoeConfigEntry* find(const MoeShape& shape, const runtime::DeviceFacts& target,
                             MoeWeightLayout weights = MoeWeightLayout::row_major) const;
  // The same for `arch` and the device named `device` (empty: no device; entries of any device
  // of the arch only).
  const MoeConfigEntry* find(const MoeShape& shape, const Arch& arch, llvm::StringRef device = {},
                             MoeWeightLayout weights = MoeWeightLayout::row_major) const;
};

llvm::Expected<MoeConfigTable> parse_moe_config_table(llvm::StringRef json_text);
llvm::json::Value moe_config_table_to_json(const MoeConfigTable& table);

// The bucket bounds used without a table: 1, 4, 16, 64, 256, 1024, 4096.
const std::vector<int64_t>& default_moe_buckets();

// The rule for a shape and a (bucket's upper bound of the) token count on `target` (its arch and
// SM count: how many CTAs fill it). sm_90a: wgmma, swap-AB while few tokens reach each expert
// (docs/moe.md, "Tile configurations": where it stops paying), the normal orientation with large
// tiles beyond. Other archs: mma.sync tiles, small while streaming weights, larger as the GEMMs
// turn compute-bound. Always valid for the shape and arch (see check_moe_config).
MoeTileConfig default_moe_config(const MoeShape& shape, int64_t tokens,
                                 const runtime::DeviceFacts& target);
// The same on `arch`'s documented device (runtime/device_facts.h: sm_90a 132 SMs).
MoeTileConfig default_moe_config(const MoeShape& shape, int64_t tokens, const Arch& arch = Arch{});

// Whether the kernels can run `config` on `shape` for `arch`: tile divisibility, warp grid,
// shared memory, wgmma only on sm_90a.
llvm::Error check_moe_config(const MoeShape& shape, const MoeTileConfig& config,
                             const Arch& arch = Arch{});
// The same for one GEMM's tile (gemm 1 or 2) over token blocks of block_m: the two GEMMs'
// tiles are independent given block_m (a tuner can choose each on its own).
llvm::Error check_moe_gemm_tile(const MoeShape& shape, int gemm, int block_m, const GemmTile& tile,
                                const Arch& arch = Arch{});

// The configuration for a call: the table's entry for (shape, arch, weights) when there is one
// (MoeConfigTable::find; else the default buckets and rule), the bucket of num_tokens, and that
// bucket's configuration.
struct ResolvedMoeConfig {
  std::vector<int64_t> bounds; // the bucketed policy's bounds
  int64_t bucket = 0;          // num_tokens' bucket: the last one for counts above it
  MoeTileConfig config;
};
llvm::Expected<ResolvedMoeConfig>
resolve_moe_config(const MoeShape& shape, int64_t num_tokens, const runtime::DeviceFacts& target,
                   const MoeConfigTable* table,
                   MoeWeightLayout weights = MoeWeightLayout::row_major);
// The same on `arch`'s documented device.
llvm::Expected<ResolvedMoeConfig>
resolve_moe_config(const MoeShape& shape, int64_t num_tokens, const Arch& arch,
                   const MoeConfigTable* table,
                   MoeWeightLayout weights = MoeWeightLayout::row_major);

// Dynamic shared memory of GEMM `gemm` (1 or 2): stages * (block_m + block_n) * 128 bytes (f16
// tokens: 2 * block_m); wgmma adds 1024 bytes of alignment slack and, FP8 GEMM1, the f16 copy of
// its B operand (normal: the weight tile, 2 * block_n * 128; swap-AB: the token tile,
// 4 * warpgroups * block_m * 128; none with f16 tokens); just
// over 48 KiB when the kernel's static indices and barriers would push the total past 48 KiB.
unsigned moe_gemm_shared_bytes(int block_m, const GemmTile& tile, MoeDType dtype, int gemm);
// What the GEMM's CTA holds in all, never less than it does: that request and its static indices
// and barriers (a wgmma CTA's up to a multiple of 1024 bytes, as ptxas allocates them).
unsigned moe_gemm_shared_total(int block_m, const GemmTile& tile, MoeDType dtype, int gemm);
// The most a GEMM's CTA may opt in to on the documented device of `arch` (runtime/device_facts.h):
// the bound check_moe_config holds moe_gemm_shared_total to.
unsigned moe_shared_limit(const Arch& arch);

} // namespace specjit::ops
