#!/usr/bin/env python3
"""Per-launch cost of a memory-hit specjit launch from Python, against a raw cuLaunchKernel of
the same cubin (ctypes, and the C figure when given), on one CUDA device.

Every launch is CPU-bound: the kernel returns at once (n = 0), so the GPU drains the queue
faster than the CPU fills it. Prints a table and writes the JSON (--json)."""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import specjit
from python_bench_kernel import SOURCE, write_report



def per_call_us(fn, n: int, repeats: int) -> float:
    """Median over repeats of the mean wall time of n calls, in microseconds."""
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def raw_launch(variant_key: str, cache_dir: str, x):
    """A ctypes cuLaunchKernel of the variant's own cubin (extracted with the CLI)."""
    from specjit._cli import cli_path
    cubin = os.path.join(tempfile.mkdtemp(), "k.cubin")
    subprocess.run([cli_path(), "inspect", variant_key, "--extract-cubin", cubin,
                    "--cache-dir", cache_dir], check=True, capture_output=True)
    cuda = ctypes.CDLL("libcuda.so.1")
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuModuleLoad(ctypes.byref(module), cubin.encode()) == 0
    name = _mangled_name(cubin)
    assert cuda.cuModuleGetFunction(ctypes.byref(func), module, name.encode()) == 0
    ptr, n, factor = ctypes.c_uint64(x.data_ptr()), ctypes.c_int64(0), ctypes.c_float(1.0)
    params = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p)
                                     for v in (ptr, n, factor)))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    launch = cuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3

    def go():
        launch(func, 1, 1, 1, 128, 1, 1, 0, stream, params, None)
    return go


def _mangled_name(cubin: str) -> str:
    """The one __global__ symbol of the cubin (ELF .symtab, STT_FUNC, named _Z...scale...)."""
    import struct
    data = open(cubin, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for s in sections:
        if s[1] == 2:  # SHT_SYMTAB
            strtab = sections[s[6]]
            for off in range(s[4], s[4] + s[5], 24):
                st_name, st_info = struct.unpack_from("<IB", data, off)
                end = data.index(b"\0", strtab[4] + st_name)
                name = data[strtab[4] + st_name:end].decode()
                if st_info & 0xF == 2 and "scale" in name:
                    return name
    raise RuntimeError("no kernel symbol in the cubin")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write the full results here")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--c-baseline-us", type=float, help="raw cuLaunchKernel from C, if measured")
    ap.add_argument("--c-baseline-json", help="specjit-bench capi's JSON: its raw_launch_us is "
                    "the C baseline (ignored when the file is missing)")
    args = ap.parse_args()
    if args.c_baseline_us is None and args.c_baseline_json and os.path.exists(args.c_baseline_json):
        import json
        with open(args.c_baseline_json) as f:
            args.c_baseline_us = json.load(f)["raw_launch_us"]
    cache = tempfile.mkdtemp(prefix="specjit-bench-")
    engine = specjit.Engine(cache_dir=cache, log="off")
    k = specjit.Kernel(source=SOURCE, function="scale", engine=engine,
                       params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})
    x = torch.zeros(128, device="cuda")
    values = {"BLOCK": 128}
    stream = torch.cuda.current_stream().cuda_stream
    k[1, 128](x, 0, 1.0, values=values)
    torch.cuda.synchronize()
    key = k.prepare(BLOCK=128).key
    native = k._native.launch
    args_tuple = (x, 0, 1.0)
    held = k[1, 128]
    cases = {
        "kernel[grid, block](...)": lambda: k[1, 128](x, 0, 1.0, values=values),
        "held launcher(...) (k[grid, block] once)": lambda: held(x, 0, 1.0, values=values),
        "kernel.launch(...)": lambda: k.launch(1, 128, args_tuple, values=values),
        "kernel.launch(..., stream=int)": lambda: k.launch(1, 128, args_tuple, values=values,
                                                           stream=stream),
        "native launch (no Python layer)": lambda: native(values, 1, 128, args_tuple, 0, None),
        "ctypes cuLaunchKernel (same cubin)": raw_launch(key, cache, x),
        "empty Python lambda": lambda: None,
    }
    results = {name: per_call_us(fn, args.calls, args.repeats) for name, fn in cases.items()}
    raw = args.c_baseline_us
    base = raw if raw is not None else results["ctypes cuLaunchKernel (same cubin)"]
    print(f"{'launch path':40s} {'us/launch':>10s} {'added vs raw':>13s}")
    for name, us in results.items():
        print(f"{name:40s} {us:10.3f} {us - base:13.3f}")
    if raw is not None:
        print(f"{'cuLaunchKernel from C (given)':40s} {raw:10.3f}")
    report = {
        "benchmark": "python_launch", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": torch.cuda.get_device_name(), "driver": torch.version.cuda,
        "python": platform.python_version(), "torch": torch.__version__,
        "specjit": specjit.__version__, "calls": args.calls, "repeats": args.repeats,
        "us_per_launch": results, "c_baseline_us": raw,
        "added_us_vs_baseline": results["kernel[grid, block](...)"] - base,
        "baseline": "cuLaunchKernel from C" if raw is not None else "ctypes cuLaunchKernel",
        "goal_added_us": 1.5, "stats": engine.stats().__dict__,
    }
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
