#!/usr/bin/env python3
"""Writes a twin of a MoE tile table with some buckets' tiles changed: the B side of an A/B
(tools/gpu_ab.sh) such as "the H200 table with Mixtral's prefill GEMM1 tiles dynamic".

    python3 tools/bench/moe_table_twin.py IN OUT --models mixtral,qwen3 --tokens 1024,4096 \
        --gemm1 dynamic=true tiles= [--gemm2 KEY=VALUE ...] [--block-m N] [--weights packed] \
        [--device "NVIDIA H200"] [--check]

Selects the entries of the named models (qwen3, mixtral, deepseek: the bench's shapes; all
models without --models), layout (row_major by default, packed, or all) and device (every
device's entries without --device; "" for entries that name none), and in each the
bucket that serves every listed token count (the first whose max_tokens is at least T; every
bucket without --tokens). KEY=VALUE sets a tile's field (VALUE read as JSON: true, 4, "bulk"),
KEY= removes it. Prints each change. --check loads the twin through the specjit package's
precompile (no GPU), which refuses a table any of whose tiles the kernels cannot run, so that a
bad twin fails here and not on the device. Exit 2 for bad arguments or when nothing matched,
1 when --check refuses the twin.
"""
import argparse
import json
import os
import sys
import tempfile

# The bench's reference shapes (tools/bench/moe_models.h): experts, top_k, hidden, intermediate.
MODELS = {"qwen3": (128, 8, 2048, 768), "mixtral": (8, 2, 4096, 14336),
          "deepseek": (256, 8, 7168, 256)}


def fail(message, code=2):
    print(f"moe_table_twin: {message}", file=sys.stderr)
    sys.exit(code)


def edits(pairs, flag):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"{flag} {pair!r}: expected KEY=VALUE or KEY=")
        try:
            out[key] = json.loads(value) if value else None
        except json.JSONDecodeError:
            fail(f"{flag} {pair!r}: {value!r} is not a JSON value "
                     "(strings need quotes)")
    return out


def bucket_for(buckets, tokens):
    """The bucket that serves `tokens` (buckets ascend by max_tokens); None past the last."""
    return next((b for b in buckets if b["max_tokens"] >= tokens), None)


def shape_of(entry):
    return tuple(entry.get(k) for k in ("experts", "top_k", "hidden", "intermediate"))


def check(path, entry):
    """Parses the whole table as a run would, through `specjit precompile` (no GPU)."""
    try:
        import specjit
    except ImportError:
        fail("--check needs the specjit Python package (pip install ./python)")
    experts, top_k, hidden, intermediate = shape_of(entry)
    model = {"type": "moe", "experts": experts, "top_k": top_k, "hidden": hidden,
             "intermediate": intermediate, "dtype": entry["dtype"], "num_tokens": [1],
             "config_table": path}
    if entry.get("device"):
        model["device"] = entry["device"]  # so that the run would take this entry
    with tempfile.TemporaryDirectory() as cache:
        try:
            specjit.precompile({"version": 1, "models": [model]}, cache_dir=cache)
        except specjit.SpecjitError as err:
            fail(f"the twin is refused: {err}", code=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table")
    parser.add_argument("out")
    parser.add_argument("--models", help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--tokens", help="comma-separated token counts")
    parser.add_argument("--weights", default="row_major", choices=["row_major", "packed", "all"])
    parser.add_argument("--gemm1", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("--gemm2", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("--block-m", type=int)
    parser.add_argument("--device", help="only the entries for this device")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()

    names = args.models.split(",") if args.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        fail(f"unknown model {unknown[0]!r}; known: {', '.join(MODELS)}")
    try:
        tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else None
    except ValueError:
        fail(f"--tokens {args.tokens!r}: expected integers")
    changes = {"gemm1": edits(args.gemm1, "--gemm1"), "gemm2": edits(args.gemm2, "--gemm2")}
    if not any(changes.values()) and args.block_m is None:
        fail("nothing to change (--gemm1, --gemm2 or --block-m)")
    try:
        with open(args.table) as f:
            table = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        fail(f"{args.table}: {err}")

    shapes = {MODELS[n]: n for n in names}
    changed = 0
    for entry in table.get("entries", []):
        model = shapes.get(shape_of(entry))
        layout = entry.get("weights", "row_major")
        if model is None or args.weights not in ("all", layout):
            continue
        if args.device is not None and entry.get("device", "") != args.device:
            continue
        buckets = entry["buckets"]
        chosen = buckets if tokens is None else [b for b in buckets if any(
            b is bucket_for(buckets, t) for t in tokens)]
        for bucket in chosen:
            where = (f"{model} {entry.get('dtype')} {layout} "
                     f"{entry.get('device') or 'any device'} max_tokens {bucket['max_tokens']}")
            if args.block_m is not None and bucket["block_m"] != args.block_m:
                print(f"{where}: block_m {bucket['block_m']} -> {args.block_m}")
                bucket["block_m"] = args.block_m
            for gemm, fields in changes.items():
                for key, value in fields.items():
                    old = bucket[gemm].get(key)
                    if value is None:
                        bucket[gemm].pop(key, None)
                    else:
                        bucket[gemm][key] = value
                    if old != value:
                        print(f"{where}: {gemm}.{key} {json.dumps(old)} -> {json.dumps(value)}")
            changed += 1
    if changed == 0:
        fail("no bucket matched the models, layout, device and token counts")
    # Written beside OUT and renamed: a twin --check refuses never stands at OUT.
    temp = args.out + ".tmp"
    with open(temp, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    if args.check:
        first = next(e for e in table["entries"] if shape_of(e) in shapes and (
            args.device is None or e.get("device", "") == args.device))
        try:
            check(os.path.abspath(temp), first)
        except SystemExit:
            os.remove(temp)
            raise
    os.replace(temp, args.out)
    print(f"{changed} buckets in {args.out}" + (" (checked)" if args.check else ""))


if __name__ == "__main__":
    main()
