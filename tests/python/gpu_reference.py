"""torch references of the built-in ops (fp32 math, the contracts in docs/), for the GPU tests."""

from __future__ import annotations

import torch

FP8_MAX = 448.0


def inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group):
    """(y fp32[T, H, 512] before quantization, scales fp32[G, T, hpg*4]) of the contract."""
    t, h, d = o.shape
    y = o.float().clone()
    cs = cos_sin_cache[positions]                       # [T, 64]
    c, s = cs[:, None, :32], cs[:, None, 32:]
    x0, x1 = y[..., 448::2], y[..., 449::2]
    y0, y1 = x0 * c + x1 * s, x1 * c - x0 * s
    y[..., 448::2], y[..., 449::2] = y0, y1
    blocks = y.reshape(t, h, 4, 128)
    amax = blocks.abs().amax(-1).clamp(min=1e-10)
    scale = torch.exp2(torch.ceil(torch.log2(amax / FP8_MAX)))    # [T, H, 4]
    scales = scale.reshape(t, n_groups, heads_per_group * 4).permute(1, 0, 2)
    return y, scales


def dequantize_inv_rope(out, out_scales, t, n_groups, heads_per_group):
    """The kernel's output as fp32[T, H, 512] and its scales as [G, T, hpg*4]."""
    k = heads_per_group * 4
    scales = out_scales[:, :, :t].permute(0, 2, 1)                  # [G, T, k]
    q = out.float().reshape(n_groups, t, k, 128) * scales[..., None]
    return q.reshape(n_groups, t, heads_per_group, 512).permute(1, 0, 2, 3).reshape(t, -1, 512), scales


def route(router_logits, top_k, renormalize):
    p = torch.softmax(router_logits.float(), dim=-1)
    w, ids = p.topk(top_k, dim=-1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w, ids.to(torch.int32)


def quantize(x, scale):
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def fused_experts(hs, w13, w2, topk_weights, topk_ids, w13_scale=None, w2_scale=None,
                  a1_scale=None, a2_scale=None):
    """fp32 reference of the layer: x -> silu(gate) * up -> (fp8: requantize) -> w2 -> sum."""
    fp8 = w13.dtype == torch.float8_e4m3fn
    x = quantize(hs.float(), a1_scale).float() * a1_scale if fp8 else hs.float()
    t, h = x.shape
    i = w2.shape[2]
    out = torch.zeros(t, h, device=hs.device)
    for e in topk_ids.unique().tolist():
        rows, slot = (topk_ids == e).nonzero(as_tuple=True)
        a = w13[e].float() * (w13_scale[e] if fp8 else 1.0)
        b = w2[e].float() * (w2_scale[e] if fp8 else 1.0)
        g = x[rows] @ a.T
        act = torch.nn.functional.silu(g[:, :i]) * g[:, i:]
        if fp8:
            act = quantize(act, a2_scale).float() * a2_scale
        out.index_add_(0, rows, (act @ b.T) * topk_weights[rows, slot, None].float())
    return out
