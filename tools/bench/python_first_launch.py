#!/usr/bin/env python3
"""A fresh Python process to its first completed launch from a warm disk cache, excluding and
including `import torch`: each case runs in new processes (median of --runs), after one run
that fills the cache. Prints a table and writes the JSON (--json)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from python_bench_kernel import SOURCE, write_report

# The child: times its phases with perf_counter from its first line; prints one JSON line.
CHILD = r"""
import time
t0 = time.perf_counter()
import json, sys
with_torch = sys.argv[1] == "torch"
phases = {}
if with_torch:
    import torch
    torch.cuda.init()
    x = torch.zeros(128, device="cuda")
    phases["import_torch_and_init_cuda"] = time.perf_counter() - t0
t1 = time.perf_counter()
import specjit
phases["import_specjit"] = time.perf_counter() - t1
t2 = time.perf_counter()
k = specjit.Kernel(source=sys.argv[2], function="scale",
                   params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})
phases["define"] = time.perf_counter() - t2
t3 = time.perf_counter()
if with_torch:
    k[1, 128](x, x.numel(), 1.0, values={"BLOCK": 128})
    torch.cuda.synchronize()
else:
    import ctypes
    k[1, 128](0, 0, 1.0, values={"BLOCK": 128}, stream=0)   # n = 0: touches no memory
    assert ctypes.CDLL("libcuda.so.1").cuCtxSynchronize() == 0
phases["first_launch_completed"] = time.perf_counter() - t3
s = k.engine.stats()
print(json.dumps({"phases_s": phases, "specjit_s": time.perf_counter() - t1,
                  "disk_hits": s.disk_hits, "compiles": s.compiles}))
"""



def run_child(mode: str, env: dict) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, SOURCE], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child ({mode}) failed:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="specjit-first-launch-")
    env = dict(os.environ, SPECJIT_CACHE_DIR=cache, SPECJIT_LOG="off")
    run_child("torch", env)                                   # fills the cache
    report = {"benchmark": "python_first_launch",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": args.runs,
              "goal_specjit_ms": 50, "cases": {}}
    print(f"{'case':16s} {'process wall ms':>16s} {'specjit share ms':>17s}  phases (ms)")
    for mode in ("no-torch", "torch"):
        runs = [run_child(mode, env) for _ in range(args.runs)]
        assert all(r["compiles"] == 0 and r["disk_hits"] == 1 for r in runs), runs
        med = lambda key: statistics.median(r[key] for r in runs) * 1e3  # noqa: E731
        phases = {p: statistics.median(r["phases_s"][p] for r in runs) * 1e3
                  for p in runs[0]["phases_s"]}
        report["cases"][mode] = {"process_wall_ms": med("process_wall_s"),
                                 "specjit_ms": med("specjit_s"), "phases_ms": phases,
                                 "runs": runs}
        detail = ", ".join(f"{p} {v:.1f}" for p, v in phases.items())
        print(f"{mode:16s} {med('process_wall_s'):16.1f} {med('specjit_s'):17.1f}  {detail}")
    try:
        import torch
        report["gpu"] = torch.cuda.get_device_name()
        report["torch"] = torch.__version__
    except ImportError:
        pass
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
