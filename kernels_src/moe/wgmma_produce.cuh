// The producer warps of the wgmma MoE GEMMs (moe/gemm_wgmma.cu; the tile traits and the CTA
// setup: moe/wgmma_pipeline.cuh). The producer loads the weight tile with TMA (128-byte swizzle;
// completes the stage's `full` mbarrier by transaction count). GEMM1 gathers the token rows by
// index with cp.async into the same swizzled layout, each thread's cp.async.mbarrier.arrive
// counting towards `full` once its copies have landed (no producer waits for its own copies).
// GEMM2's token rows, and those of GEMM1 tiles on a sorted copy, are contiguous (sorted order):
// one more TMA box on the same barrier. Here: the weights' and token rows' loads of a step, the
// GEMM1 -> GEMM2 block hand-off, and the fixed schedule's producer loop (the persistent
// schedules': moe/wgmma_persistent.cuh).
#pragma once

#include "moe/wgmma_pipeline.cuh"

namespace specjit_kernels {

// Where a GEMM's weights [E][rows][K bytes] come from and how they are read (the variant's
// template value WEIGHTS, G::k_weights):
//   row_major_map  the row-major tensor through `map` (rank 3: K bytes, rows of an expert,
//                  experts; boxes of 128 bytes of K x the stage's rows, 128-byte swizzle);
//   packed_bulk    their packed copy (moe/pack_weights.cu) at `packed`, by bulk copies: pieces
//                  of 32 rows x 128 bytes of K, each already in the 128-byte swizzle's order,
//                  piece (row / 32 of all experts' rows, k / 128) at
//                  4096 * (row / 32 * K / 128 + k / 128), so a stage's rows are rows / 32
//                  contiguous pieces, one bulk copy each. Bulk copies stream at the read rate
//                  where tensor-map boxes reach 0.93-0.97 of it (tools/probes/decode_stream.cu);
//   packed_map     the packed copy through `map` (rank 4: 128 bytes, 32 rows, K / 128 pieces,
//                  row groups; boxes of the stage's rows / 32 pieces, no swizzle: the pieces are
//                  in its order already): tensor-map reads, for the tiles where bulk copies are
//                  slower (the host's choice: a table tile's "reads", else its rule).
// A run-time layout argument instead cost the row-major variants up to 1.3 % on the H200.
struct MoeWeights {
  const TmaDesc* map;
  const unsigned char* packed;
};

// `rows` rows (a multiple of 32) from row `row0` of `expert`, 128 bytes of K at k_byte, into
// `dst`, as the row-major map's box would land them.
template <class G>
__device__ __forceinline__ void moe_load_weight_rows(const MoeWeights& w, unsigned dst,
                                                     unsigned bar, int k_byte, int row0, int expert,
                                                     int rows) {
  if constexpr (G::k_weights == MoeWeightReads::row_major_map) {
    tma_load_3d(dst, w.map, bar, k_byte, row0, expert);
  } else {
    constexpr int k_rows = G::k_gated ? 2 * G::k_n : G::k_n; // of an expert: GEMM1 gate and up
    const int group = (expert * k_rows + row0) / k_moe_piece_rows;
    if constexpr (G::k_weights == MoeWeightReads::packed_map) {
      tma_load_4d(dst, w.map, bar, 0, 0, k_byte / 128, group);
    } else {
      constexpr long long k_pieces = G::k_k_bytes / 128; // of a row group
      const long long first = group * k_pieces + k_byte / 128;
      for (int j = 0; j < rows / k_moe_piece_rows; ++j)
        bulk_load(dst + j * k_moe_piece_bytes,
                  w.packed + (first + j * k_pieces) * k_moe_piece_bytes, k_moe_piece_bytes, bar);
    }
  }
}

// One pipeline step's loads, by the producer warps (k_producers threads; thread 0 issues the
// weights' loads). Step kt lives in stage kt % STAGES. Weights: the stage's `full` barrier expects
// their bytes once its previous use has been released (`empty`); GEMM1 loads its gate half and
// its up half (w_row_half rows further) as two boxes.
template <class G>
__device__ __forceinline__ void moe_load_weights(const MoeWgmmaBlock& b, const MoeWeights& w,
                                                 int kt, int k_byte, int w_row0, int expert,
                                                 int w_row_half) {
  const int producer = static_cast<int>(threadIdx.x) - G::k_consumers;
  const int s = kt % G::k_stages_value;
  const unsigned full = b.full_bar + 8 * s;
  mbarrier_wait(b.empty_bar + 8 * s, ((kt / G::k_stages_value) & 1) ^ 1);
  if (producer == 0) {
    const unsigned w_tile = b.tiles + s * G::k_stage_bytes;
    // With TMA token rows the producer arrives once those are requested too (moe_load_tokens).
    if constexpr (G::k_a_tma)
      mbarrier_expect_tx(full, G::k_w_tile_bytes);
    else
      mbarrier_arrive_expect_tx(full, G::k_w_tile_bytes);
    constexpr int k_box_rows = G::k_gated ? G::k_bw / 2 : G::k_bw;
    static_assert(G::k_weights == MoeWeightReads::row_major_map ||
                      (k_box_rows % k_moe_piece_rows == 0 && G::k_n % k_moe_piece_rows == 0),
                  "whole pieces of packed weights");
    moe_load_weight_rows<G>(w, w_tile, full, k_byte, w_row0, expert, k_box_rows);
    if constexpr (G::k_gated)
      moe_load_weight_rows<G>(w, w_tile + G::k_w_tile_bytes / 2, full, k_byte, w_row0 + w_row_half,
                              expert, k_box_rows);
  }
}
// Token rows of step kt: GEMM1 gathers them from `a` by a_rows (cp.async, each producer thread
// arriving once its copies have landed); GEMM2 and the sorted f16-token GEMM1 load rows m_block *
// TOK.. of `a_map` (TMA; f16 tokens: two boxes, the stage's two 128-byte halves of K).
template <class G>
__device__ __forceinline__ void moe_load_tokens(const MoeWgmmaBlock& b, const unsigned char* a,
                                                const TmaDesc* a_map, const int* a_rows, int kt,
                                                int k_byte, int m_block) {
  const int producer = static_cast<int>(threadIdx.x) - G::k_consumers;
  const unsigned full = b.full_bar + 8 * (kt % G::k_stages_value);
  const unsigned t_tile = b.tiles + (kt % G::k_stages_value) * G::k_stage_bytes + G::k_w_tile_bytes;
  if constexpr (G::k_a_tma) {
    if (producer == 0) {
      mbarrier_arrive_expect_tx(full, G::k_t_tile_bytes);
#pragma unroll
      for (int half = 0; half < G::k_t_bytes_per_k; ++half)
        tma_load_3d(t_tile + half * G::k_tok * 128, a_map, full,
                    G::k_t_bytes_per_k * k_byte + half * 128, m_block * G::k_tok, 0);
    }
  } else {
    // Each thread copies the same 16-byte chunk g of every k_rows_per_pass-th row (its
    // destination's swizzle and its source offset are fixed; only the row changes): k_chunks chunks
    // a row (f16 tokens: 256 bytes, chunk g in K half g / 8). Padding rows are not copied: an
    // MMA's output row or column of a padding row depends on that row alone, and the epilogues
    // drop it, so the stage may hold anything there (in a partly filled block, about half of a
    // swap-AB tile's rows).
    constexpr int k_chunks = G::k_t16 ? 16 : 8;
    constexpr int k_rows_per_pass = G::k_producers / k_chunks;
    static_assert(G::k_producers % k_chunks == 0 && G::k_tok % k_rows_per_pass == 0,
                  "whole rows per pass, whole passes per tile");
    const int g = producer % k_chunks, r0 = producer / k_chunks;
    const unsigned dst = t_tile + (g >> 3) * G::k_tok * 128 + r0 * 128;
    const unsigned char* src = a + G::k_t_bytes_per_k * k_byte + g * 16;
#pragma unroll
    for (int i = 0; i < G::k_tok / k_rows_per_pass; ++i) {
      const int r = r0 + i * k_rows_per_pass;
      const int row = a_rows[r];
      if (row >= 0)
        cp_async_16(dst + i * k_rows_per_pass * 128 + (((g & 7) ^ (r & 7)) << 4),
                    src + static_cast<long long>(row) * G::k_a_row_bytes, 16);
    }
    cp_async_mbarrier_arrive(full);
  }
}

// What a GEMM's token rows wait for. GEMM1 (depends false): nothing, they are the layer's input.
// GEMM2: GEMM1's output. Without hand-off counters, the whole of the previous grid
// (griddepcontrol.wait, once). With them (the block hand-off), each token block only until
// GEMM1 has written all of it: every warp that runs a GEMM1 tile's epilogue adds 1 to the
// block's counter once its stores are visible (moe_handoff_signal), and the block is complete
// at `target` (GEMM1's tiles per block x its epilogue warps; the host's number). So under a
// programmatic launch GEMM2 works on GEMM1's first blocks while GEMM1's last CTAs run. No
// deadlock: GEMM2's CTAs start only once every GEMM1 CTA has started (launch_dependents runs
// at a CTA's start), so every counter GEMM2 waits for is being counted. The counters are zero
// between layer calls: moe_align zeroes them, and the last of GEMM2's `producers` producer
// warps to finish zeroes them again (moe_dependence_end); the host turns the hand-off on only
// for a call that runs both GEMMs.
struct MoeDependence {
  bool depends = false;
  int* counters = nullptr; // the hand-off counters (k_handoff_counters), or null
  int target = 0;
  int producers = 0; // GEMM2's producer warps that read the counters (set by the schedule)
  int blocks = 0;    // token blocks of this call
};

// The producer's copy of `d`, completed by the schedule: this call's token blocks and the
// number of producer warps that will call moe_dependence_end.
template <class G>
__device__ __forceinline__ MoeDependence moe_producer_dependence(const MoeDependence& d,
                                                                 const int* num_post_padded,
                                                                 int producers) {
  MoeDependence dep = d;
  dep.blocks = moe_ldg(num_post_padded) / G::k_tok;
  dep.producers = producers;
  return dep;
}

// Before a producer's first token rows of block m_block (`ready`: the block it last waited for,
// -1 at first).
__device__ __forceinline__ void moe_wait_rows(const MoeDependence& d, int m_block, int& ready) {
  if (!d.depends || m_block == ready)
    return;
  if (d.counters) {
    if ((threadIdx.x & 31) == 0) {
      const int* counter = d.counters + m_block;
      int count;
#pragma unroll 1
      for (int polls = 0;; ++polls) { // relaxed polls (an acquire load would cost more each time)
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(count) : "l"(counter) : "memory");
        if (count >= d.target)
          break;
        if (polls >= 8)
          __nanosleep(32);
      }
      asm volatile("fence.acq_rel.gpu;" ::: "memory"); // with the count: acquire
      // The rows were written by generic stores; TMA reads them through the async proxy.
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncwarp();
  } else if (ready < 0) {
    grid_dependency_wait();
  }
  ready = m_block;
}

// After a producer warp's last loads, with the hand-off: the last producer to get here waits
// for GEMM1's grid, so GEMM2 still ends after GEMM1 (the kernels after it in the stream count
// on the order; the others exit at once), and zeroes the counters for the next call.
__device__ __forceinline__ void moe_dependence_end(const MoeDependence& d) {
  if (!d.counters)
    return;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  int* done = d.counters - k_handoff_counters + k_handoff_done;
  int last = 0;
  if (lane == 0) {
    // Release: this warp's reads of the counters come before its count; acquire for the last.
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    last = atomicAdd(done, 1) == d.producers - 1;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  if (shfl_idx_i32(last, 0)) {
    grid_dependency_wait();
    for (int i = lane; i < d.blocks; i += 32)
      d.counters[i] = 0;
    if (lane == 0)
      *done = 0;
  }
}

// GEMM1, by every warp that ran a tile's epilogue, after its stores of token block m_block.
__device__ __forceinline__ void moe_handoff_signal(unsigned char* scratch, int m_block) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0 && m_block < k_handoff_blocks) {
    // A release add: the warp's stores (ordered before it by __syncwarp) are visible to whoever
    // sees the count.
    int* counter = reinterpret_cast<int*>(scratch) + k_handoff_counters + m_block;
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory");
  }
}

// The producer warps of the fixed schedule. GEMM2 (d.depends): the token rows are the previous
// kernel's output, so the first stages' weights are requested before waiting for them
// (moe_wait_rows); under a programmatic launch the weight stream overlaps the end of GEMM1.
template <class G>
__device__ __forceinline__ void
moe_wgmma_produce(const MoeWgmmaBlock& b, const MoeWeights& w_map, const unsigned char* a,
                  const TmaDesc* a_map, const int* a_rows, int w_row_half, const MoeDependence& d) {
  // Step kt of the CTA's k_steps: stage kt % k_k_tiles of K of its tile kt / k_k_tiles.
  auto k_byte = [&](int kt) { return (b.k_tile0 + kt % G::k_k_tiles) * 128; };
  auto load_weights = [&](int kt) {
    moe_load_weights<G>(b, w_map, kt, k_byte(kt), (b.tile + kt / G::k_k_tiles) * G::k_out_cols,
                        b.expert, w_row_half);
  };
  const int prefetched =
      d.depends ? (G::k_steps < G::k_stages_value ? G::k_steps : G::k_stages_value) : 0;
#pragma unroll 1
  for (int kt = 0; kt < prefetched; ++kt)
    load_weights(kt);
  int ready = -1;
  moe_wait_rows(d, b.m_block, ready);
#pragma unroll 1
  for (int kt = 0; kt < G::k_steps; ++kt) {
    if (kt >= prefetched)
      load_weights(kt);
    moe_load_tokens<G>(b, a, a_map, a_rows, kt, k_byte(kt), b.m_block);
  }
  cp_async_wait<0>(); // no copy outlives its thread
  moe_dependence_end(d);
}

} // namespace specjit_kernels
