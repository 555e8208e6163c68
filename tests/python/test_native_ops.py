"""Every bad input to the built-in ops raises before any launch, naming the argument: dtype,
shape, contiguity, then device (numpy arrays with ml_dtypes' bf16 and fp8 are host tensors)."""

from __future__ import annotations

import numpy as np
import pytest

import specjit
from specjit import native_ops

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
T, G, HPG = 5, 2, 1


def rope_args(**change):
    args = {"o": np.zeros((T, G * HPG, 512), BF16), "positions": np.arange(T, dtype=np.int64),
            "cos_sin_cache": np.zeros((64, 64), np.float32),
            "out": np.zeros((G, T, HPG * 512), FP8),
            "out_scales": np.zeros((G, HPG * 4, 8), np.float32)}
    args.update(change)
    return args


def call_rope(**change):
    native_ops.inv_rope_fp8_quant(**rope_args(**change), n_groups=G, heads_per_group=HPG)


@pytest.mark.parametrize("name,bad,match", [
    ("o", np.zeros((T, G * HPG, 512), np.float32), "o: dtype float32, expected bfloat16"),
    ("positions", np.arange(T, dtype=np.int32), "positions: dtype int32, expected int64"),
    ("out", np.zeros((G, T, 512), np.float32), "out: dtype float32"),
    ("o", np.zeros((T, 3, 512), BF16), r"o: shape \[5, 3, 512\], expected \[\*, 2, 512\]"),
    ("positions", np.arange(T + 1, dtype=np.int64), r"positions: shape \[6\], expected \[5\]"),
    ("cos_sin_cache", np.zeros((64, 32), np.float32), "cos_sin_cache: shape"),
    ("out_scales", np.zeros((G, 4, 5), np.float32), r"out_scales: shape .*\[2, 4, 8\]"),
    ("cos_sin_cache", np.zeros((64, 128), np.float32)[:, ::2], "cos_sin_cache: not contiguous"),
    ("positions", None, "positions: missing argument"),
    ("o", [1, 2], "o: expected a tensor"),
])
def test_inv_rope_bad_inputs_are_named(name, bad, match):
    with pytest.raises(specjit.InvalidArgumentError, match=match):
        call_rope(**{name: bad})


def test_inv_rope_host_tensors_are_refused_by_device():
    with pytest.raises(specjit.InvalidArgumentError, match="o: a tensor on the cpu"):
        call_rope()


def test_inv_rope_group_counts_must_be_positive():
    with pytest.raises(specjit.InvalidArgumentError, match="n_groups=0"):
        native_ops.inv_rope_fp8_quant(**rope_args(), n_groups=0, heads_per_group=1)


E, K, H, I = 4, 2, 128, 128


def moe_args(fp8=True, **change):
    dt = FP8 if fp8 else BF16
    args = {"hidden_states": np.zeros((T, H), dt), "w1": np.zeros((E, 2 * I, H), dt),
            "w2": np.zeros((E, H, I), dt), "out": np.zeros((T, H), BF16),
            "workspace": np.zeros(1 << 25, np.uint8),
            "topk_weights": np.zeros((T, K), np.float32), "topk_ids": np.zeros((T, K), np.int32)}
    if fp8:
        args.update(a1_scale=np.ones(1, np.float32), a2_scale=np.ones(1, np.float32),
                    w1_scale=np.ones(E, np.float32), w2_scale=np.ones(E, np.float32))
    args.update(change)
    return args


@pytest.mark.parametrize("name,bad,match", [
    ("hidden_states", np.zeros((T, H), np.float32), "hidden_states: dtype float32"),
    ("w1", np.zeros((E, 2 * I, H), BF16), "w1: dtype bfloat16, expected float8_e4m3fn"),
    ("w1", np.zeros((E, 2 * I, H + 1), FP8), r"w1: shape .*expected \[\*, \*, 128\]"),
    ("w2", np.zeros((E, H, 2 * I), FP8), r"w2: shape .*expected \[4, 128, 128\]"),
    ("topk_ids", np.zeros((T, K), np.int64), "topk_ids: dtype int64, expected int32"),
    ("topk_weights", np.zeros((T + 1, K), np.float32), "topk_weights: shape"),
    ("topk_ids", None, "topk_ids: missing argument"),
    ("w1_scale", None, "w1_scale: missing argument"),
    ("a2_scale", np.ones(2, np.float32), r"a2_scale: shape \[2\], expected \[1\]"),
    ("out", np.zeros((T, H), np.float32), "out: dtype float32, expected bfloat16"),
    ("workspace", np.zeros(16, np.uint8), "workspace: 16 bytes, expected at least"),
    ("hidden_states", np.zeros((H, T), FP8).T, "hidden_states: shape|not contiguous"),
])
def test_fused_moe_bad_inputs_are_named(name, bad, match):
    with pytest.raises(specjit.InvalidArgumentError, match=match):
        native_ops.fused_moe(**moe_args(**{name: bad}))


def test_fused_moe_accumulation_is_e4m3_or_exact():
    with pytest.raises(specjit.InvalidArgumentError, match="accumulation='fp16': expected"):
        native_ops.fused_moe(**moe_args(), accumulation="fp16")
    # Both names pass the argument checks (the host tensors are refused after them).
    for accumulation in ("e4m3", "exact"):
        with pytest.raises(specjit.InvalidArgumentError, match="a tensor on the cpu"):
            native_ops.fused_moe(**moe_args(), accumulation=accumulation)


def test_fused_moe_bf16_takes_no_scales():
    with pytest.raises(specjit.InvalidArgumentError, match="a1_scale: given"):
        native_ops.fused_moe(**moe_args(fp8=False, a1_scale=np.ones(1, np.float32)))


def test_fused_moe_router_logits_shape_is_checked():
    with pytest.raises(specjit.InvalidArgumentError, match=r"router_logits: shape .*\[5, 4\]"):
        native_ops.fused_moe(**moe_args(topk_ids=None, topk_weights=None,
                                        router_logits=np.zeros((T, E + 1), np.float32)), top_k=K)


def test_fused_moe_host_tensors_are_refused_by_device():
    with pytest.raises(specjit.InvalidArgumentError, match="hidden_states: a tensor on the cpu"):
        native_ops.fused_moe(**moe_args())


def test_the_workspace_size_grows_with_tokens():
    small = native_ops.moe_workspace_bytes(E, K, H, I, True, 1)
    large = native_ops.moe_workspace_bytes(E, K, H, I, True, 4096)
    assert 0 < small < large
