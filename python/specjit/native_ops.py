"""The built-in ops on caller-provided tensors, without torch: every argument is checked by name
(dtype, shape, contiguity, then device) before anything is launched. specjit.ops wraps these
as torch custom ops that also allocate outputs and workspace."""

from __future__ import annotations

from .engine import Engine, default_engine
from .errors import InvalidArgumentError
from .tensors import check, check_devices, descriptor, view
from ._native import lib

FP8, BF16 = "float8_e4m3fn", "bfloat16"
HEAD_DIM, ROPE_DIM = 512, 64


def _round_up(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def inv_rope_fp8_quant(o, positions, cos_sin_cache, out, out_scales, n_groups: int,
                       heads_per_group: int, *, engine: Engine | None = None,
                       stream=None) -> None:
    """Fused inverse RoPE + FP8 quantization of the DeepSeek-V4 attention output:
    o bf16[T, G*hpg, 512], positions int64[T], cos_sin_cache f32[max_pos, 64] into
    out e4m3[G, T, hpg*512] and out_scales f32[G, hpg*4, round_up(T, 4)]."""
    g, hpg = int(n_groups), int(heads_per_group)
    if g < 1 or hpg < 1:
        raise InvalidArgumentError(f"n_groups={g}, heads_per_group={hpg}: both must be >= 1")
    views = {"o": check(o, "o", BF16, (None, g * hpg, HEAD_DIM))}
    t = views["o"].shape[0]
    views["positions"] = check(positions, "positions", "int64", (t,))
    views["cos_sin_cache"] = check(cos_sin_cache, "cos_sin_cache", "float32", (None, ROPE_DIM))
    views["out"] = check(out, "out", FP8, (g, t, hpg * HEAD_DIM))
    views["out_scales"] = check(out_scales, "out_scales", "float32", (g, hpg * 4, _round_up(t, 4)))
    check_devices(views)
    d = [descriptor(v) for v in views.values()]
    lib.op_inv_rope_fp8_quant((engine or default_engine())._native, *d, g, hpg, stream)


def moe_workspace_bytes(experts: int, top_k: int, hidden: int, intermediate: int, fp8: bool,
                        num_tokens: int) -> int:
    """Bytes of the u8 workspace fused_moe needs for num_tokens tokens."""
    return lib.moe_workspace_bytes(experts, top_k, hidden, intermediate, fp8, num_tokens)


def _moe_weights(hidden_states, w1, w2) -> dict:
    hs = check(hidden_states, "hidden_states", (FP8, BF16), (None, None))
    h = hs.shape[1]
    w13 = check(w1, "w1", hs.dtype, (None, None, h))
    e, two_i = w13.shape[0], w13.shape[1]
    if two_i % 2:
        raise InvalidArgumentError(f"w1: shape {list(w13.shape)}, expected [E, 2*I, H] (2*I even)")
    return {"hidden_states": hs, "w13": w13,
            "w2": check(w2, "w2", hs.dtype, (e, h, two_i // 2))}


def _moe_routing(views, t, e, router_logits, topk_weights, topk_ids, top_k):
    if router_logits is not None:
        views["router_logits"] = check(router_logits, "router_logits", "float32", (t, e))
        return int(top_k)
    if topk_ids is None or topk_weights is None:
        missing = "topk_ids" if topk_ids is None else "topk_weights"
        raise InvalidArgumentError(f"{missing}: missing argument (give router_logits, or "
                                   "topk_weights and topk_ids)")
    k = view(topk_ids, "topk_ids").shape[-1]
    views["topk_weights"] = check(topk_weights, "topk_weights", "float32", (t, k))
    views["topk_ids"] = check(topk_ids, "topk_ids", "int32", (t, k))
    return k


def fused_moe(hidden_states, w1, w2, out, workspace, *, router_logits=None, topk_weights=None,
              topk_ids=None, top_k: int = 0, renormalize: bool = True, w1_scale=None,
              w2_scale=None, a1_scale=None, a2_scale=None, engine: Engine | None = None,
              stream=None, accumulation: str = "e4m3") -> None:
    """The fused MoE layer into ``out`` bf16[T, H]: FP8 W8A8 per-tensor (hidden_states e4m3,
    w1 = w13 e4m3[E, 2I, H], w2 e4m3[E, H, I], w1_scale/w2_scale f32[E], a1_scale/a2_scale
    f32[1]) or bf16 (no scales). Routing from router_logits f32[T, E] (softmax, top_k,
    renormalize) or from topk_weights f32[T, k] and topk_ids int32[T, k]. accumulation: FP8
    GEMM1 on e4m3 tensor cores where the tuned table says ("e4m3", the default) or on f16 MMAs,
    bit for bit the re-quantizing reference ("exact"); docs/moe.md, "Accumulation"."""
    if accumulation not in ("e4m3", "exact"):
        raise InvalidArgumentError(f"accumulation={accumulation!r}: expected 'e4m3' or 'exact'")
    views = _moe_weights(hidden_states, w1, w2)
    t, h = views["hidden_states"].shape
    e, i = views["w13"].shape[0], views["w2"].shape[2]
    k = _moe_routing(views, t, e, router_logits, topk_weights, topk_ids, top_k)
    if k < 1 or k > e:
        raise InvalidArgumentError(f"top_k={k}: must be in [1, {e}]")
    fp8 = views["hidden_states"].dtype == FP8
    scales = {"a1_scale": (a1_scale, 1), "w13_scale": (w1_scale, e), "a2_scale": (a2_scale, 1),
              "w2_scale": (w2_scale, e)}
    for name, (scale, n) in scales.items():
        label = name.replace("w13", "w1")
        if fp8:
            views[name] = check(scale, label, "float32", (n,))
        elif scale is not None:
            raise InvalidArgumentError(f"{label}: given, but bf16 weights take no scales")
    views["out"] = check(out, "out", BF16, (t, h))
    views["workspace"] = check(workspace, "workspace", "uint8", (None,))
    need = moe_workspace_bytes(e, k, h, i, fp8, t)
    if views["workspace"].shape[0] < need:
        raise InvalidArgumentError(f"workspace: {views['workspace'].shape[0]} bytes, "
                                   f"expected at least {need}")
    check_devices(views)
    lib.op_fused_moe((engine or default_engine())._native, e, k, h, i, bool(renormalize),
                     {n: descriptor(v) for n, v in views.items()}, stream,
                     accumulation == "exact")
