// The dynamic schedule's order of its work items (token block, weight tile) and its ring, read by
// both sides: the kernels (moe/wgmma_persistent.cuh) and the host (the order's tests, the ring's
// shared memory). Plain C++ with no CUDA header (NVRTC compiles it as device code under
// -default-device).
#pragma once

namespace specjit_kernels {

// Entries of the ring in which a CTA's producers publish the tiles they take, in static shared
// memory: more than STAGES, as the producers run at most STAGES steps ahead of the consumers.
inline constexpr int k_dynamic_ring = 16;

// Item `item` of blocks x tiles: its token block and tile, and the group of consecutive token
// blocks it belongs to (blocks first .. first + count - 1). `group` 1: block-major (a block's
// tiles one after the other). Larger: the fixed schedule's grouped order (moe_wgmma_setup),
// each tile for `group` consecutive blocks (the last group: the blocks left), then the next
// tile, so that the CTAs in flight share each weight tile through L2. Every (block, tile) is
// one item of [0, blocks x tiles).
struct MoeDynamicItem {
  int m_block, tile, first, count;
};
inline MoeDynamicItem moe_dynamic_item(int item, int blocks, int group, int tiles) {
  const int span = group * tiles, in = item % span;
  MoeDynamicItem it;
  it.first = item / span * group;
  it.count = blocks - it.first < group ? blocks - it.first : group;
  it.m_block = it.first + in % it.count;
  it.tile = in / it.count;
  return it;
}

} // namespace specjit_kernels
