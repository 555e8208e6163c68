#!/usr/bin/env python3
"""Prints the markdown tables of docs/moe.md and docs/bench/moe-accuracy-h200.md.

    python3 tools/bench/moe_tables.py figures docs/bench/moe-h200.json
    python3 tools/bench/moe_tables.py accuracy table=TABLE.txt forced=E4M3.txt whole=WHOLE.txt \
        sorted=SORTED.txt

figures: one row per model and T of a `specjit-bench moe --routings N` report (the fixed
routing, the mean over the routings, each against the peer's same figure).
accuracy: the MESSAGE lines the GPU tests print (tests/gpu/fused_moe_support.cpp), one
section per NAME=LOG; a log of the built-in table's case holds each model's row-major buckets,
then its packed ones.
"""
import json
import re
import sys

SHAPES = {"qwen3-30b-a3b": "Qwen3-30B-A3B", "mixtral-8x7b": "Mixtral-8x7B",
          "deepseek-v3-tp8": "DeepSeek-V3 TP8"}


def figures(path):
    report = json.load(open(path))
    print("| model | T | experts (mean) | fixed | peer fixed | x | mean | peer mean | x "
          "| floor % | TFLOP/s | layer | configuration |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in report["rows"]:
        if r["dtype"] != "fp8":
            continue
        s = r["routing_samples"]
        print(f"| {SHAPES.get(r['model'], r['model'])} | {r['tokens']} "
              f"| {s['distinct_experts_mean']:.1f} | {r['gemm_us']:.1f} | {r['peer_gemm_us']:.1f} "
              f"| {r['speedup_vs_peer']:.2f} | {s['gemm_us_mean']:.1f} "
              f"| {s['peer_gemm_us_mean']:.1f} | {s['speedup_vs_peer']:.2f} "
              f"| {100 * s['fraction_of_floor']:.0f} | {r['tflops']:.1f} | {r['layer_us']:.1f} "
              f"| `{r['config']}` |")


CALL = re.compile(r"MESSAGE: (\S+) fp8 T=(\d+) \((.*)\): rel\. error vs emulated (\S+), "
                  r"vs fp32 \S+ over (\d+) rows")
E4M3 = re.compile(r"MESSAGE:\s+e4m3 accumulation: vs truth (\S+), the emulating reference's "
                  r"(\S+) \(ratio (\S+)\)")


def calls(log):
    rows = []
    for line in open(log):
        if m := CALL.search(line):
            rows.append(dict(zip(("model", "T", "config", "emulating", "rows"), m.groups())))
        elif (m := E4M3.search(line)) and rows:
            rows[-1].update(zip(("truth", "reference", "ratio"), m.groups()))
    return rows


def accuracy(parts):
    worst = 0.0
    for part in parts:
        name, log = part.split("=", 1)
        rows = calls(log)
        table = name == "table"
        print(f"## {name}\n")
        head = ["model", "T"] + (["weights"] if table else []) + [
            "configuration", "rows", "vs emulating", "vs truth", "emulating vs truth", "ratio"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        seen = set()
        for r in rows:
            key = (r["model"], r["T"])
            weights = "packed" if key in seen else "row-major"
            seen.add(key)
            e4m3 = ["%.4g" % float(r[k]) for k in ("truth", "reference")] if "ratio" in r else ["", ""]
            ratio = "%.4f" % float(r["ratio"]) if "ratio" in r else ""
            if ratio:
                worst = max(worst, float(r["ratio"]))
            cells = [r["model"], r["T"]] + ([weights] if table else []) + [
                f"`{r['config']}`", r["rows"], "%.3g" % float(r["emulating"])] + e4m3 + [ratio]
            print("| " + " | ".join(cells) + " |")
        print()
    print(f"Largest ratio: {worst:.4f}.")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "figures":
        figures(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "accuracy":
        accuracy(sys.argv[2:])
    else:
        sys.exit(__doc__)
