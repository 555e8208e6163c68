#!/usr/bin/env python3
"""Summarizes an A/B of `specjit-bench moe` runs, the way the report's A/Bs were read.

A device call runs the variants alternately on one GPU (binaries, tables or flags) and writes
each run's table under a marker line `#### bench TAG`, for example:

    for i in 1 2; do
      for v in base new; do
        echo "#### bench $v" >> $OUT/r.txt
        .gpu/bin/bench_$v moe --table ops/moe/tables/moe-configs.json --dtypes fp8 >> $OUT/r.txt
      done
    done

Then, here:

    python3 tools/bench/moe_ab.py r.txt

prints, per model, dtype and T, each tag's mean GEMM us (GEMM1 alone + GEMM2 alone), layer
us and, where the rows have it, the host's us in an eager call, over its runs, every run's GEMM
us, and each tag's GEMM time over the first tag's; for runs with `--routings N`, a second line a
tag with the same for the mean over the routings. tools/gpu_ab.sh's `#### table` lines (which
device's entries each table ran) come first; lines of other sections (other `####` markers) are
skipped.
"""
import collections
import re
import statistics
import sys


# A row's routing line: "   4     307.3 mean over 20 routings (237.1..394.9), 5.3 experts, ..."
ROUTINGS = re.compile(r"\s+(\d+)\s+([\d.]+) mean over (\d+) routings")


def parse(lines):
    """{(model, dtype, T): {tag: [(gemm, g1, g2, layer, host), ...]}}, the tags in order,
    {(model, dtype, T): {tag: [mean GEMM us over the routings, ...]}}, and the `#### table` lines.

    host is None in rows written before the bench printed it (column 8 is then floor%)."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    routed = collections.defaultdict(lambda: collections.defaultdict(list))
    tags, tag, row = [], None, None
    tables = []
    for line in lines:
        if line.startswith("#### table "):
            tables.append(line[len("#### "):].rstrip("\n"))
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
            row = (f[0], f[1], int(f[2]))
            runs[row][tag].append((float(f[3]), float(f[5]), float(f[6]), float(f[7]), host))
            continue
        # The routing lines of a model follow its row; each names its T.
        mean = ROUTINGS.match(line)
        if tag and row and mean:
            routed[(row[0], row[1], int(mean.group(1)))][tag].append(float(mean.group(2)))
    return runs, tags, routed, tables


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as text:
        runs, tags, routed, tables = parse(text)
    if not runs:
        print(f"no `#### bench TAG` sections with specjit-bench moe rows in {sys.argv[1]}")
        return 1
    for line in tables:
        print(line)
    for key in sorted(runs):
        model, dtype, tokens = key
        print(f"{model} {dtype} T={tokens}")
        base = routed_base = None
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
            means = routed[key].get(tag)
            if means:
                routed_base = routed_base or statistics.mean(means)
                print(f"  {'':>16}  routings {statistics.mean(means):8.1f}  "
                      f"x{statistics.mean(means) / routed_base:.3f}  "
                      f"[{' '.join(f'{m:.1f}' for m in means)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
