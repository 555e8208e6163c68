// The device buffers of a tp-startup rank, every input random and drawn on the device
// (device_random.h), so that a rank's set-up keeps no host core busy: the inverse-RoPE op's
// and the MoE layer's (moe_harness.h's Buffers, without their host copies: tp-startup checks
// no output).
#pragma once

#include "device_random.h"
#include "moe_harness.h"
#include "tp_startup.h"

namespace specjit::bench {

// What the buffers hold (written into the report).
inline constexpr const char* k_tp_data =
    "random, drawn on the device from the plan's seed: MoE hidden N(0,1), w13 N(0,1/H), w2 "
    "N(0,1/I) as e4m3 with one scale a tensor (5 sigma / 448), router logits N(0,1); "
    "inverse-RoPE o N(0,1) bf16, cos/sin N(0,1/4) f32, positions uniform in [0, max_pos)";

// The inverse-RoPE op's buffers for up to `max_tokens` tokens.
struct RopeBuffers {
  const runtime::Driver& drv;
  CUdeviceptr o = 0, positions = 0, cos_sin = 0, out = 0, scales = 0;
  static constexpr int64_t heads = k_tp_rope_groups * k_tp_rope_heads_per_group;

  RopeBuffers(const runtime::Driver& driver, DeviceRandom& random, int64_t max_tokens,
              uint64_t seed, CUstream stream);
  ~RopeBuffers();
  RopeBuffers(const RopeBuffers&) = delete;
  RopeBuffers& operator=(const RopeBuffers&) = delete;

  llvm::Error launch(runtime::Engine& engine, int64_t tokens, CUstream stream) const;
};

// The MoE layer's buffers of shape `s` for up to `max_tokens` tokens (k_weight_copies copies
// of the weights, all alike).
Setup make_device_moe_setup(const runtime::Driver& drv, DeviceRandom& random,
                            const ops::MoeShape& s, int64_t max_tokens, uint64_t seed,
                            CUstream stream);

} // namespace specjit::bench
