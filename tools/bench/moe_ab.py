#!/usr/bin/env python3
"""Summarizes an A/B of `specjit-bench moe` runs, the way the report's A/Bs were read.

A device call runs the variants alternately on one GPU (binaries, tables or flags) and writes
each run's table under a marker line `#### bench TAG`, for example:

    for i in 1 2; do
      for v in base new; do
        echo "#### bench $v" >> $OUT/r.txt
        .gpu/bin/bench_$v moe --table ops/moe/tables/moe-configs-h200.json --dtypes fp8 >> $OUT/r.txt
      done
    done

Then, here:

    python3 tools/bench/moe_ab.py r.txt

prints, per model, dtype and T, each tag's mean GEMM us (GEMM1 alone + GEMM2 alone), layer
us and, where the rows have it, the host's us in an eager call, over its runs, every run's GEMM us, and each tag's GEMM time over the first tag's. Lines of
other sections (`####` markers without `bench`) are skipped.
"""
import collections
import re
import statistics
import sys


def parse(lines):
    """{(model, dtype, T): {tag: [(gemm, g1, g2, layer, host), ...]}} and the tags in order.

    host is None in rows written before the bench printed it (column 8 is then floor%)."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    tags, tag = [], None
    for line in lines:
        marker = re.match(r"#### bench (\S+)", line)
        if marker:
            tag = marker.group(1)
            if tag not in tags:
                tags.append(tag)
            continue
        if line.startswith("####"):
            tag = None
            continue
        f = line.split()
        # model dt T gemm_us no_pdl g1 g2 layer_us [host] floor% ...
        if tag and len(f) > 8 and f[1] in ("fp8", "bf16") and f[2].isdigit():
            host = None if f[8].endswith("%") else float(f[8])
            runs[(f[0], f[1], int(f[2]))][tag].append(
                (float(f[3]), float(f[5]), float(f[6]), float(f[7]), host))
    return runs, tags


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as text:
        runs, tags = parse(text)
    if not runs:
        print(f"no `#### bench TAG` sections with specjit-bench moe rows in {sys.argv[1]}")
        return 1
    for key in sorted(runs):
        model, dtype, tokens = key
        print(f"{model} {dtype} T={tokens}")
        base = None
        for tag in tags:
            rows = runs[key].get(tag)
            if not rows:
                continue
            mean = [statistics.mean(r[i] for r in rows) for i in range(4)]
            base = base or mean[0]
            each = " ".join(f"{r[0]:.1f}" for r in rows)
            hosts = [r[4] for r in rows if r[4] is not None]
            host = f"  host {statistics.mean(hosts):6.1f}" if hosts else ""
            print(f"  {tag:>16}  gemm {mean[0]:8.1f} ({mean[1]:.1f} + {mean[2]:.1f})  "
                  f"layer {mean[3]:8.1f}{host}  x{mean[0] / base:.3f}  [{each}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
