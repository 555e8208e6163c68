#!/usr/bin/env python3
"""Sets a GEMM time over many routings against what each routing makes the GEMMs run.

    specjit-bench moe-routing --models mixtral --tokens 1024 --routings 100 --json routing.json
    python3 tools/bench/moe_routing_fit.py routing.json docs/bench/moe-h200.json

routing.json: `specjit-bench moe-routing` (no GPU): per seed, distinct experts, token blocks, swap-AB
MMA columns and normal-orientation rows. The second file: `specjit-bench moe --routings N --json`,
whose rows carry routing_samples (GEMM us per fresh routing, seeds 1..N, the dtype given by
--dtype). For each (model, T) in both: the least-squares line GEMM us = a + b x, its correlation
and residual for x = each of the routing's measures. Pure Python.
"""
import argparse
import json
import math
import sys

MEASURES = ("blocks", "swap_columns", "normal_rows", "distinct_experts")


def fit(xs, ys):
    """(intercept, slope, correlation, rms residual) of ys over xs; None if xs do not vary."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx == 0 or syy == 0:
        return None
    slope = sxy / sxx
    intercept = my - slope * mx
    rms = math.sqrt(sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys)) / n)
    return intercept, slope, sxy / math.sqrt(sxx * syy), rms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("routing", help="specjit-bench moe-routing --json output")
    parser.add_argument("bench", help="specjit-bench moe --routings N --json output")
    parser.add_argument("--dtype", default="fp8")
    args = parser.parse_args()
    try:
        routing = json.load(open(args.routing))["rows"]
        bench = json.load(open(args.bench))["rows"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"moe_routing_fit: cannot read the inputs: {e}")
    matched = 0
    for r in routing:
        fresh = [s for s in r["routings"] if not s["fixed"]]
        fixed = [s for s in r["routings"] if s["fixed"]]
        for b in bench:
            samples = b.get("routing_samples")
            if (b["model"] != r["model"] or b["tokens"] != r["tokens"] or
                    b["dtype"] != args.dtype or not samples):
                continue
            us = samples["gemm_us"]
            if len(us) > len(fresh):
                print(f"{r['model']} T={r['tokens']}: {len(us)} timed routings but only "
                      f"{len(fresh)} rebuilt; rerun moe-routing with --routings {len(us)}")
                continue
            if [s["distinct_experts"] for s in fresh[:len(us)]] != samples["distinct_experts"]:
                print(f"{r['model']} T={r['tokens']}: the rebuilt routings' distinct experts "
                      "differ from the timed ones (another generator?); skipped")
                continue
            matched += 1
            print(f"{r['model']} T={r['tokens']} {args.dtype}, blocks of {r['block_m']}, "
                  f"{len(us)} routings, GEMM {min(us):.1f}..{max(us):.1f} us"
                  + (f", fixed routing {fixed[0]['blocks']} blocks, {b['gemm_us']:.1f} us"
                     if fixed else ""))
            for m in MEASURES:
                xs = [s[m] for s in fresh[:len(us)]]
                f = fit(xs, us)
                if f is None:
                    print(f"  {m:17s} {min(xs)}..{max(xs)}: does not vary")
                    continue
                a, slope, corr, rms = f
                print(f"  {m:17s} {min(xs)}..{max(xs)}: us = {a:.1f} + {slope:.3f} x, "
                      f"r = {corr:.3f}, rms {rms:.1f} us")
    if matched == 0:
        sys.exit("moe_routing_fit: no (model, T) with timed routings in both files")


if __name__ == "__main__":
    main()
