#!/usr/bin/env python3
"""Checks issue 5's acceptance points against a `specjit-bench moe` report, point by point.

    python3 tools/bench/moe_acceptance.py docs/bench/moe-h200-packed.json

For each FP8 row (model, T) it prints the GEMM time, on the fixed routing and, where the report
has them (`--routings N`), the mean over the routings, which is how the peer measures, next to:
  - peer:   faster than the peer's GEMM time;
  - 1.5x:   at T <= 4, and at T >= 1024 for the many-expert models (Qwen3, DeepSeek), at most
            the peer's time / 1.5; where that target is below the weight-streaming floor (the
            distinct experts' bytes over 4.46 TB/s) no kernel can meet it, marked "floor";
  - 85%:    at T <= 256, at least 85 % of that floor;
  - layer:  at T <= 64, the whole layer within the GEMMs' time + 15 us.
Then a count per point. The judgement uses the mean over routings when the report has it
(the peer's method), else the fixed routing.
"""
import json
import sys

MANY_EXPERTS = ("qwen3", "deepseek")


def judged(row):
    samples = row.get("routing_samples")
    if samples:
        return samples["gemm_us_mean"], samples["floor_us_mean"]
    return row["gemm_us"], row["floor_us"]


def mark(ok):
    return "yes" if ok else "NO"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    report = json.load(open(sys.argv[1]))
    m = report["machine"]
    print(f"{sys.argv[1]}: {m['gpu']}, NVRTC {m['nvrtc']}, {m['date']}")
    print(f"{'model':16} {'T':>5} {'fixed':>8} {'mean':>8} {'peer':>7} {'x':>5} "
          f"{'1.5x target':>12} {'floor':>7} {'floor%':>7} {'layer-gemm':>10}  "
          f"peer 1.5x 85% layer")
    counts = {}
    below = 0  # 1.5x targets below the floor

    def count(name, ok):
        if ok is None:
            return
        met, total = counts.get(name, (0, 0))
        counts[name] = (met + bool(ok), total + 1)

    for row in report["rows"]:
        if row["dtype"] != "fp8" or "peer_gemm_us" not in row:
            continue
        t = row["tokens"]
        gemm, floor = judged(row)
        samples = row.get("routing_samples", {})
        mean = samples.get("gemm_us_mean")
        # The peer's figure on the same routing as `gemm`: its mean over routings with the mean.
        peer = samples.get("peer_gemm_us_mean", row["peer_gemm_us"]) if mean else row["peer_gemm_us"]
        wants_15 = t <= 4 or (t >= 1024 and row["model"].startswith(MANY_EXPERTS))
        target = peer / 1.5 if wants_15 else None
        below_floor = target is not None and target < floor
        points = {
            "peer": gemm < peer,
            "1.5x": (gemm <= target) if wants_15 else None,
            "85%": (floor / gemm >= 0.85) if t <= 256 else None,
            "layer": (row["layer_us"] - row["gemm_us"] <= 15.0) if t <= 64 else None,
        }
        for name, ok in points.items():
            count(name, ok)
        below += below_floor
        cells = []
        for name, ok in points.items():
            text = "-" if ok is None else mark(ok)
            if name == "1.5x" and below_floor:
                text += "(floor)"
            cells.append(text)
        print(f"{row['model']:16} {t:5d} {row['gemm_us']:8.1f} "
              f"{(f'{mean:8.1f}' if mean else '       -')} {peer:7.1f} {peer / gemm:5.2f} "
              f"{(f'{target:12.1f}' if target else '           -')} {floor:7.1f} "
              f"{100 * floor / gemm:6.1f}% {row['layer_us'] - row['gemm_us']:10.1f}  "
              + " ".join(cells))
    print()
    for name, (met, total) in counts.items():
        print(f"{name}: {met} of {total}")
    print(f"1.5x targets below the weight-streaming floor (no kernel can meet them): {below}")


if __name__ == "__main__":
    main()
