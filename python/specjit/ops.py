"""specjit's built-in ops as torch custom ops (namespace ``specjit``), with fake implementations
so torch.compile(fullgraph=True) traces them. Importing this module imports torch; importing
``specjit`` does not. Outputs and the MoE workspace come from torch's caching allocator, on the
inputs' device; launches go to torch's current stream.

    torch.ops.specjit.fused_experts(hidden_states, w1, w2, topk_weights, topk_ids,
                                    w1_scale, w2_scale, a1_scale, a2_scale)
    torch.ops.specjit.fused_moe(hidden_states, w1, w2, router_logits, top_k, renormalize, ...)
    torch.ops.specjit.inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group)
"""

# No `from __future__ import annotations`: torch.library reads the annotations as types.
from typing import Optional

import torch
from torch import Tensor

from . import native_ops

FP8_MAX = 448.0


def _quantize(hidden_states: Tensor, a1_scale: Optional[Tensor]):
    """vLLM's per-tensor activation quantization: a static a1_scale, else amax / 448."""
    if hidden_states.dtype == torch.float8_e4m3fn:
        return hidden_states, a1_scale
    if a1_scale is None:
        amax = hidden_states.abs().amax().float().clamp(min=1e-12)
        a1_scale = (amax / FP8_MAX).reshape(1)
    q = (hidden_states.float() / a1_scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, a1_scale


def _run_moe(hidden_states, w1, w2, routing: dict, top_k, renormalize, w1_scale, w2_scale,
             a1_scale, a2_scale) -> Tensor:
    fp8 = w1.dtype == torch.float8_e4m3fn
    hs, a1 = _quantize(hidden_states, a1_scale) if fp8 else (hidden_states, a1_scale)
    t, h = hs.shape
    e, two_i, _ = w1.shape
    k = routing["topk_ids"].shape[1] if "topk_ids" in routing else top_k
    out = torch.empty((t, h), dtype=torch.bfloat16, device=hs.device)
    need = native_ops.moe_workspace_bytes(e, k, h, two_i // 2, fp8, t)
    workspace = torch.empty(max(need, 1), dtype=torch.uint8, device=hs.device)
    native_ops.fused_moe(hs, w1, w2, out, workspace, top_k=k, renormalize=renormalize,
                         w1_scale=w1_scale, w2_scale=w2_scale, a1_scale=a1, a2_scale=a2_scale,
                         **routing)
    return out


@torch.library.custom_op("specjit::fused_experts", mutates_args=())
def fused_experts(hidden_states: Tensor, w1: Tensor, w2: Tensor, topk_weights: Tensor,
                  topk_ids: Tensor, w1_scale: Optional[Tensor] = None,
                  w2_scale: Optional[Tensor] = None, a1_scale: Optional[Tensor] = None,
                  a2_scale: Optional[Tensor] = None) -> Tensor:
    """vLLM's fused_experts (FP8 W8A8 per-tensor when w1 is float8_e4m3fn, else bf16):
    hidden_states bf16[T, H], w1 = w13 [E, 2I, H], w2 [E, H, I], topk_weights f32[T, k],
    topk_ids int32 (int64 is converted) [T, k]; returns bf16[T, H]."""
    if topk_ids.dtype == torch.int64:
        topk_ids = topk_ids.to(torch.int32)
    routing = {"topk_weights": topk_weights.float(), "topk_ids": topk_ids}
    return _run_moe(hidden_states, w1, w2, routing, 0, False, w1_scale, w2_scale, a1_scale,
                    a2_scale)


@torch.library.custom_op("specjit::fused_moe", mutates_args=())
def fused_moe(hidden_states: Tensor, w1: Tensor, w2: Tensor, router_logits: Tensor, top_k: int,
              renormalize: bool = True, w1_scale: Optional[Tensor] = None,
              w2_scale: Optional[Tensor] = None, a1_scale: Optional[Tensor] = None,
              a2_scale: Optional[Tensor] = None) -> Tensor:
    """vLLM's fused_moe: routing from router_logits [T, E] (softmax, top_k, renormalize),
    then fused_experts."""
    routing = {"router_logits": router_logits.float()}
    return _run_moe(hidden_states, w1, w2, routing, top_k, renormalize, w1_scale, w2_scale,
                    a1_scale, a2_scale)


@torch.library.custom_op("specjit::inv_rope_fp8_quant", mutates_args=())
def inv_rope_fp8_quant(o: Tensor, positions: Tensor, cos_sin_cache: Tensor, n_groups: int,
                       heads_per_group: int) -> tuple[Tensor, Tensor]:
    """The DeepSeek-V4 inverse RoPE + FP8 quantization: returns (out e4m3[G, T, hpg*512],
    scales f32[G, hpg*4, round_up(T, 4)])."""
    out, scales = _inv_rope_outputs(o, n_groups, heads_per_group)
    native_ops.inv_rope_fp8_quant(o, positions, cos_sin_cache, out, scales, n_groups,
                                  heads_per_group)
    return out, scales


def _inv_rope_outputs(o: Tensor, n_groups: int, heads_per_group: int):
    t = o.shape[0]
    out = o.new_empty((n_groups, t, heads_per_group * native_ops.HEAD_DIM),
                      dtype=torch.float8_e4m3fn)
    scales = o.new_empty((n_groups, heads_per_group * 4, (t + 3) // 4 * 4), dtype=torch.float32)
    return out, scales


def _moe_fake(hidden_states, *args, **kwargs):
    return hidden_states.new_empty(hidden_states.shape, dtype=torch.bfloat16)


fused_experts.register_fake(_moe_fake)
fused_moe.register_fake(_moe_fake)


@inv_rope_fp8_quant.register_fake
def _(o, positions, cos_sin_cache, n_groups, heads_per_group):
    return _inv_rope_outputs(o, n_groups, heads_per_group)
