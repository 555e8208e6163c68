#!/usr/bin/env python3
"""A serving-style replay: a trace of requests with varying token counts through a DeepSeek-V4
style attention output (inverse RoPE + FP8 quantization) and an FP8 MoE layer, the way a torch
runtime calls them (torch.ops.specjit.*). Each run replays the trace eagerly and then under one
CUDA graph per captured batch size (token counts padded up to it, as vLLM does).

The parent starts two fresh processes on one new cache: the first finds it cold (every variant
compiles on the request path), the second warm (zero compiles: the compile share of the time to
first token is gone). Copy the child's structure into a runtime: warm up (or precompile), seal,
capture, serve.

    python examples/python/serving_replay.py [--requests 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

CAPTURE_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
E, K, H, I = 64, 6, 2048, 768            # an FP8 MoE layer of Qwen3/DeepSeek-like width
G, HPG = 4, 8                            # inverse-RoPE groups and heads per group


def trace(n: int, seed: int) -> list[int]:
    """Token counts per step: decode batches mixed with prefill chunks."""
    rng = random.Random(seed)
    return [rng.choice([rng.randint(1, 64), rng.randint(1, 512)]) for _ in range(n)]


def child(args) -> dict:
    import torch
    import specjit
    import specjit.ops  # noqa: F401  (registers torch.ops.specjit.*)

    t_start = time.perf_counter()
    dev = "cuda"
    gen = torch.Generator(dev).manual_seed(0)
    w13 = (torch.randn(E, 2 * I, H, generator=gen, device=dev) * 0.05).to(torch.float8_e4m3fn)
    w2 = (torch.randn(E, H, I, generator=gen, device=dev) * 0.05).to(torch.float8_e4m3fn)
    w1s = torch.full((E,), 0.05 / 448 * 4, device=dev)
    w2s = torch.full((E,), 0.05 / 448 * 4, device=dev)
    a1s, a2s = torch.tensor([0.01], device=dev), torch.tensor([0.02], device=dev)
    angles = torch.rand(8192, 32, generator=gen, device=dev) * 6.2832
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1)
    max_t = max(CAPTURE_SIZES)
    o = torch.randn(max_t, G * HPG, 512, generator=gen, device=dev).to(torch.bfloat16)
    hs = torch.randn(max_t, H, generator=gen, device=dev).to(torch.bfloat16)
    logits = torch.randn(max_t, E, generator=gen, device=dev)
    positions = torch.randint(0, 8192, (max_t,), generator=gen, device=dev)

    def step(t: int):
        out, scales = torch.ops.specjit.inv_rope_fp8_quant(o[:t], positions[:t], cos_sin, G, HPG)
        y = torch.ops.specjit.fused_moe(hs[:t], w13, w2, logits[:t], K, True, w1s, w2s, a1s, a2s)
        return out, scales, y

    engine = specjit.default_engine()
    steps = trace(args.requests, args.seed)
    result = {"requests": len(steps), "distinct_token_counts": len(set(steps))}

    def replay(name: str, run_one):
        before = engine.stats()
        log_start = time.time()
        lat, first = [], None
        for t in steps:
            t0 = time.perf_counter()
            run_one(t)
            torch.cuda.synchronize()
            lat.append((time.perf_counter() - t0) * 1e3)
            first = first if first is not None else time.perf_counter() - t_start
        after = engine.stats()
        compile_s = sum(e.ms for e in specjit.read_log(os.environ["SPECJIT_LOG"])
                        if e.event == "compile" and e.pid == os.getpid()
                        and _epoch(e.ts) >= log_start) / 1e3
        lat.sort()
        result[name] = {"compiles": after.compiles - before.compiles,
                        "disk_hits": after.disk_hits - before.disk_hits,
                        "compile_s_on_request_path": compile_s,
                        "first_step_done_s_since_start": first,
                        "step_ms_median": statistics.median(lat),
                        "step_ms_p99": lat[int(0.99 * (len(lat) - 1))],
                        "step_ms_max": lat[-1]}

    replay("eager", step)
    graphs = {}
    for size in CAPTURE_SIZES:               # warmed by the eager pass for sizes it hit
        step(size)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step(size)
        graphs[size] = g
    engine.seal()                            # serving: any later compile is logged as such
    replay("cuda_graph", lambda t: graphs[next(s for s in CAPTURE_SIZES if s >= t)].replay())
    result["stats"] = engine.stats().__dict__
    return result


def _epoch(ts: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def print_run(label: str, r: dict) -> None:
    print(f"\n{label}: {r['requests']} requests, {r['distinct_token_counts']} distinct token counts")
    print(f"  {'mode':11s} {'compiles':>8s} {'disk':>5s} {'compile s':>9s} {'1st step s':>10s} "
          f"{'median ms':>9s} {'p99 ms':>7s} {'max ms':>8s}")
    for mode in ("eager", "cuda_graph"):
        m = r[mode]
        print(f"  {mode:11s} {m['compiles']:8d} {m['disk_hits']:5d} "
              f"{m['compile_s_on_request_path']:9.3f} {m['first_step_done_s_since_start']:10.3f} "
              f"{m['step_ms_median']:9.3f} {m['step_ms_p99']:7.3f} {m['step_ms_max']:8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    cache = tempfile.mkdtemp(prefix="specjit-replay-")
    env = dict(os.environ, SPECJIT_CACHE_DIR=cache, SPECJIT_LOG=os.path.join(cache, "events.jsonl"))
    runs = {}
    for label in ("cold", "warm"):
        proc = subprocess.run([sys.executable, __file__, "--child", "--requests",
                               str(args.requests), "--seed", str(args.seed)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        runs[label] = json.loads(proc.stdout.strip().splitlines()[-1])
        print_run(f"{label} cache (fresh process)", runs[label])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "shape": {"E": E, "top_k": K, "H": H, "I": I, "G": G, "hpg": HPG},
                       "runs": runs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
