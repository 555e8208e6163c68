// The fused MoE op's tuning and test knobs, on top of FusedMoeOptions: which stages a call runs,
// a forced tile configuration, and the schedule choices the op otherwise makes by its rules
// (docs/moe.md, "Tuning knobs", has what each rule measured). Benchmarks, the tuner, tests and
// callers that route themselves (stages without route) use them; a serving call needs none.
#pragma once

#include "ops/moe/fused_moe.h"

#include <optional>

namespace specjit::ops {

// Which stages a call runs (benchmarks time the GEMMs alone with routing left in place). The
// GEMM stages count on the workspace's counters (MoeWorkspaceLayout::counter_ints at stream_k)
// being zero, as the align stage leaves them and the GEMMs leave them again; after a call that
// failed between its GEMMs, run one with the align stage before GEMMs alone.
enum MoeStage : unsigned {
  moe_stage_route = 1,
  moe_stage_align = 2,
  moe_stage_gemm1 = 4,
  moe_stage_gemm2 = 8,
  moe_stage_reduce = 16,
  moe_stage_all = 31,
};

// GEMM2's block hand-off: it takes each token block as soon as GEMM1 has written it, rather than
// after the whole of GEMM1 (wgmma GEMMs, when the call runs both). automatic: FP8 from 32
// tokens an expert on.
enum class MoeHandoff { automatic, always, never };
// The order in which the wgmma GEMMs' CTAs (fixed schedule) take token blocks and weight tiles:
// grouped (8 consecutive blocks per weight tile, so blocks of one expert share its tiles in L2)
// or block-major (each block's tiles in turn, so blocks complete one after another and GEMM2 can
// take them early). automatic: block-major for FP8 with the hand-off and at most 8 experts of at
// most one block each, grouped elsewhere.
enum class MoeLaunchOrder { automatic, grouped, block_major };

struct MoeTuning {
  std::optional<MoeTileConfig> config; // forces one configuration, for every token count
  unsigned stages = moe_stage_all;
  // wgmma GEMM2 launched as a programmatic dependent of GEMM1 (PDL; when the call runs GEMM1):
  // it streams its weights while GEMM1 finishes. Off: plain stream order.
  bool programmatic_launch = true;
  MoeHandoff handoff = MoeHandoff::automatic;
  MoeLaunchOrder launch_order = MoeLaunchOrder::automatic;
  // How packed weights are read (else the table's tile's choice, else the rule).
  MoePackedReads packed_reads = MoePackedReads::automatic;
};

// The options and the knobs in one, for the callers that set both. Not a FusedMoeOptions to the
// compiler (the base is private), so that no call drops the knobs by passing it as one.
struct TunedMoeOptions : private FusedMoeOptions, MoeTuning {
  using FusedMoeOptions::renormalize;
  using FusedMoeOptions::table;
  using FusedMoeOptions::accumulation;
  const FusedMoeOptions& options() const { return *this; }
  FusedMoeOptions& options() { return *this; }
};

// fused_moe with the knobs.
llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& shape,
                      const FusedMoeTensors& tensors, const TunedMoeOptions& options,
                      CUstream stream);

// prepare_fused_moe with the knobs.
llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const TunedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts = {},
                  MoeWeightLayout weights = MoeWeightLayout::row_major);

// fused_moe_variants with the knobs (a forced configuration, the packed reads; every stage).
llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& shape, const TunedMoeOptions& options,
                   const runtime::DeviceFacts& target, llvm::ArrayRef<int64_t> token_counts = {},
                   MoeWeightLayout weights = MoeWeightLayout::row_major);
llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& shape, const TunedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts = {},
                   MoeWeightLayout weights = MoeWeightLayout::row_major);

} // namespace specjit::ops
