"""The built-in ops on the GPU against torch references, on fresh random data with poisoned
outputs; eager, under CUDA-graph capture and replay, and under torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.torch]

torch = pytest.importorskip("torch", reason="[gpu] needs torch with a CUDA device")

from specjit import native_ops  # noqa: E402
import gpu_reference as ref  # noqa: E402

E, K, H, I = 8, 2, 512, 256
G, HPG = 2, 4


def rope_inputs(t, gen):
    o = torch.randn(t, G * HPG, 512, generator=gen, device="cuda").to(torch.bfloat16)
    positions = torch.randint(0, 4096, (t,), generator=gen, device="cuda")
    angles = torch.rand(4096, 32, generator=gen, device="cuda") * 6.2832
    return o, positions, torch.cat([angles.cos(), angles.sin()], dim=1)


def check_rope(o, positions, cache, out, scales):
    t = o.shape[0]
    y, want_scales = ref.inv_rope_fp8_quant(o, positions, cache, G, HPG)
    got, got_scales = ref.dequantize_inv_rope(out, scales, t, G, HPG)
    assert torch.isfinite(got).all(), "an output element kept its poison"
    assert (got_scales == want_scales).float().mean() > 0.999
    tol = 0.0725 * y.abs() + want_scales.permute(1, 0, 2).reshape(t, -1, 4).repeat_interleave(
        128, -1).reshape(t, -1, 512) * 2 ** -9
    assert ((got - y).abs() <= tol).float().mean() > 0.999
    assert (scales[:, :, t:] == 0).all(), "padding rows get zero scales"


@pytest.mark.parametrize("t", [1, 5, 64, 333])
def test_inv_rope_matches_the_reference_with_poisoned_outputs(t):
    gen = torch.Generator("cuda").manual_seed(1000 + t)
    o, positions, cache = rope_inputs(t, gen)
    out = torch.full((G, t, HPG * 512), 0x7F, dtype=torch.uint8, device="cuda").view(
        torch.float8_e4m3fn)                                  # 0x7F is e4m3fn's NaN
    scales = torch.full((G, HPG * 4, (t + 3) // 4 * 4), float("nan"), device="cuda")
    native_ops.inv_rope_fp8_quant(o, positions, cache, out, scales, G, HPG)
    torch.cuda.synchronize()
    check_rope(o, positions, cache, out, scales)


def moe_inputs(t, gen, fp8=True):
    hs = (torch.randn(t, H, generator=gen, device="cuda") * 0.5).to(torch.bfloat16)
    w13 = torch.randn(E, 2 * I, H, generator=gen, device="cuda") * 0.05
    w2 = torch.randn(E, H, I, generator=gen, device="cuda") * 0.05
    logits = torch.randn(t, E, generator=gen, device="cuda")
    if not fp8:
        return dict(hs=hs, w13=w13.bfloat16(), w2=w2.bfloat16(), logits=logits, scales={})
    w13_scale = w13.abs().amax((1, 2)) / 448
    w2_scale = w2.abs().amax((1, 2)) / 448
    scales = dict(w1_scale=w13_scale, w2_scale=w2_scale,
                  a1_scale=(hs.float().abs().amax() / 448).reshape(1),
                  a2_scale=torch.tensor([0.02], device="cuda"))
    return dict(hs=hs, w13=ref.quantize(w13, w13_scale[:, None, None]),
                w2=ref.quantize(w2, w2_scale[:, None, None]), logits=logits, scales=scales)


def moe_reference(m, weights, ids):
    s = m["scales"]
    return ref.fused_experts(m["hs"], m["w13"], m["w2"], weights, ids, s.get("w1_scale"),
                             s.get("w2_scale"), s.get("a1_scale"), s.get("a2_scale"))


def assert_moe_close(got, want):
    assert torch.isfinite(got.float()).all(), "an output element kept its poison"
    err = (got.float() - want).abs().max().item()
    assert err <= 0.03 * want.abs().max().item() + 1e-3, f"max error {err}"


@pytest.mark.parametrize("t,fp8", [(1, True), (7, True), (100, True), (33, False)])
def test_fused_experts_matches_the_reference_with_poisoned_outputs(t, fp8):
    gen = torch.Generator("cuda").manual_seed(2000 + t)
    m = moe_inputs(t, gen, fp8)
    weights, ids = ref.route(m["logits"], K, True)
    hs = ref.quantize(m["hs"].float(), m["scales"]["a1_scale"]) if fp8 else m["hs"]
    out = torch.full((t, H), float("nan"), dtype=torch.bfloat16, device="cuda")
    ws = torch.empty(native_ops.moe_workspace_bytes(E, K, H, I, fp8, t), dtype=torch.uint8,
                     device="cuda")
    native_ops.fused_moe(hs, m["w13"], m["w2"], out, ws, topk_weights=weights, topk_ids=ids,
                         **m["scales"])
    torch.cuda.synchronize()
    assert_moe_close(out, moe_reference(m, weights, ids))


def test_the_torch_ops_match_the_references():
    import specjit.ops  # noqa: F401
    gen = torch.Generator("cuda").manual_seed(3000)
    m = moe_inputs(48, gen)
    weights, ids = ref.route(m["logits"], K, True)
    s = m["scales"]
    got = torch.ops.specjit.fused_experts(m["hs"], m["w13"], m["w2"], weights, ids.long(),
                                          s["w1_scale"], s["w2_scale"], s["a1_scale"],
                                          s["a2_scale"])
    assert_moe_close(got, moe_reference(m, weights, ids))
    from_logits = torch.ops.specjit.fused_moe(m["hs"], m["w13"], m["w2"], m["logits"], K, True,
                                              s["w1_scale"], s["w2_scale"], s["a1_scale"],
                                              s["a2_scale"])
    assert_moe_close(from_logits, moe_reference(m, weights, ids))
    o, positions, cache = rope_inputs(48, gen)
    out, scales = torch.ops.specjit.inv_rope_fp8_quant(o, positions, cache, G, HPG)
    check_rope(o, positions, cache, out, scales)


def _both_ops(o, positions, cache, hs, w13, w2, logits, s):
    out, scales = torch.ops.specjit.inv_rope_fp8_quant(o, positions, cache, G, HPG)
    y = torch.ops.specjit.fused_moe(hs, w13, w2, logits, K, True, s["w1_scale"], s["w2_scale"],
                                    s["a1_scale"], s["a2_scale"])
    return out, scales, y


def test_both_ops_capture_and_replay_in_a_cuda_graph():
    import specjit.ops  # noqa: F401
    gen = torch.Generator("cuda").manual_seed(4000)
    t = 24
    o, positions, cache = rope_inputs(t, gen)
    m = moe_inputs(t, gen)
    args = (o, positions, cache, m["hs"], m["w13"], m["w2"], m["logits"], m["scales"])
    _both_ops(*args)                       # warm-up: compiles and loads outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, scales, y = _both_ops(*args)
    for step in range(3):                  # fresh random inputs into the captured buffers
        fresh_o, fresh_pos, _ = rope_inputs(t, gen)
        o.copy_(fresh_o)
        positions.copy_(fresh_pos)
        m["hs"].copy_(moe_inputs(t, gen)["hs"])
        m["logits"].copy_(torch.randn(t, E, generator=gen, device="cuda"))
        out.view(torch.uint8).fill_(0x7F)
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_rope(o, positions, cache, out, scales)
        weights, ids = ref.route(m["logits"], K, True)
        assert_moe_close(y, moe_reference(m, weights, ids))


def test_torch_compile_fullgraph_traces_both_ops():
    import specjit.ops  # noqa: F401
    gen = torch.Generator("cuda").manual_seed(5000)
    t = 16
    o, positions, cache = rope_inputs(t, gen)
    m = moe_inputs(t, gen)

    def layer(o, positions, cache, hs, w13, w2, logits, a, b, c, d):
        out, scales = torch.ops.specjit.inv_rope_fp8_quant(o, positions, cache, G, HPG)
        y = torch.ops.specjit.fused_moe(hs, w13, w2, logits, K, True, a, b, c, d)
        return out, scales, y * 2

    compiled = torch.compile(layer, fullgraph=True)
    s = m["scales"]
    out, scales, y2 = compiled(o, positions, cache, m["hs"], m["w13"], m["w2"], m["logits"],
                               s["w1_scale"], s["w2_scale"], s["a1_scale"], s["a2_scale"])
    torch.cuda.synchronize()
    check_rope(o, positions, cache, out, scales)
    weights, ids = ref.route(m["logits"], K, True)
    assert_moe_close(y2 / 2, moe_reference(m, weights, ids))
