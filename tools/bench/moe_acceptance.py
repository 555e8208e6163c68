#!/usr/bin/env python3
"""Checks the fused MoE targets of ../shared/KERNELS.md against a `specjit-bench moe` report.

    python3 tools/bench/moe_acceptance.py docs/bench/moe-h200.json

For each FP8 row (model, T) it prints the GEMM time on the fixed routing and, where the report has
them (`--routings N`), the mean over the routings, each against the peer's figure on the same
routing, and judges:
  - peer:   faster than the peer, on the fixed routing and on the mean (both must hold);
  - 1.2x:   at T >= 1024, at least 1.2x the peer on both; where 1.2x would take more than the
            measured FP8 matmul ceiling (1300 TFLOP/s) no kernel can meet it, marked "limit";
  - floor:  at T = 4-256 at least 90 % of the weight-streaming floor (the distinct experts'
            bytes over 4.46 TB/s), at T = 1 at least 75 %; on the mean where the report has it.
Then a count per point. The peer's figures are an H200's: a report from another GPU carries no
ratios (its "peer" says "compared": false), and the script says so and exits 1.
"""
import json
import sys

FP8_TFLOPS = 1300.0  # measured FP8 matmul ceiling on the H200 (KERNELS.md)


def flops(row):
    return 2.0 * row["tokens"] * row["top_k"] * 3.0 * row["intermediate"] * row["hidden"]


def judge(row):
    """The row's points: name -> True, False or None (not a point at this T), the limit flag and
    the fraction of the floor the points judge."""
    t = row["tokens"]
    samples = row.get("routing_samples") or {}
    pairs = [(row["gemm_us"], row["peer_gemm_us"])]
    if "gemm_us_mean" in samples and "peer_gemm_us_mean" in samples:
        pairs.append((samples["gemm_us_mean"], samples["peer_gemm_us_mean"]))
    fraction = samples.get("fraction_of_floor", row["fraction_of_floor"])
    limit = False
    wants_12 = None
    if t >= 1024:
        wants_12 = all(peer / gemm >= 1.2 for gemm, peer in pairs)
        # The time 1.2x allows, against the time the FLOPs take at the ceiling.
        limit = min(peer for _, peer in pairs) / 1.2 < flops(row) / (FP8_TFLOPS * 1e12) * 1e6
    wanted_floor = 0.75 if t == 1 else 0.90 if t <= 256 else None
    return {
        "peer": all(gemm < peer for gemm, peer in pairs),
        "1.2x": wants_12,
        "floor": None if wanted_floor is None else fraction >= wanted_floor,
    }, limit, fraction


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    report = json.load(open(sys.argv[1]))
    m = report.get("machine", {})
    print(f"{sys.argv[1]}: {m.get('gpu', '?')}, NVRTC {m.get('nvrtc', '?')}, {m.get('date', '?')}")
    rows = [r for r in report["rows"] if r["dtype"] == "fp8" and "peer_gemm_us" in r]
    if not rows:
        why = ("its GPU is not the one the peer was measured on"
               if report.get("peer", {}).get("compared") is False else "it has no peer figures")
        print(f"no FP8 row to judge: {why}")
        return 1
    print(f"{'model':16} {'T':>5} {'fixed':>8} {'peer':>7} {'x':>5} {'mean':>8} {'peer':>7} "
          f"{'x':>5} {'floor%':>7}  peer 1.2x floor")
    counts = {"peer": (0, 0), "1.2x": (0, 0), "floor": (0, 0)}
    limits = 0
    for row in rows:
        points, limit, fraction = judge(row)
        limits += limit
        samples = row.get("routing_samples") or {}
        mean = samples.get("gemm_us_mean")
        peer_mean = samples.get("peer_gemm_us_mean")
        mean_cells = (f"{mean:8.1f} {peer_mean:7.1f} {peer_mean / mean:5.2f}"
                      if mean and peer_mean else f"{'-':>8} {'-':>7} {'-':>5}")
        cells = []
        for name, ok in points.items():
            if ok is not None:
                met, total = counts[name]
                counts[name] = (met + ok, total + 1)
            text = "-" if ok is None else "yes" if ok else "NO"
            cells.append(text + ("(limit)" if name == "1.2x" and limit and not ok else ""))
        print(f"{row['model']:16} {row['tokens']:5d} {row['gemm_us']:8.1f} "
              f"{row['peer_gemm_us']:7.1f} {row['peer_gemm_us'] / row['gemm_us']:5.2f} "
              f"{mean_cells} {100 * fraction:6.1f}%  " + " ".join(cells))
    print()
    for name, (met, total) in counts.items():
        print(f"{name}: {met} of {total}")
    print(f"1.2x targets past the FP8 matmul ceiling of {FP8_TFLOPS:.0f} TFLOP/s "
          f"(no kernel can meet them): {limits}")
    return 0 if all(met == total for met, total in counts.values()) else 2


if __name__ == "__main__":
    sys.exit(main())
