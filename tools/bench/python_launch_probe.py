#!/usr/bin/env python3
"""What specjit's Python launch path itself costs, on any machine (no GPU, no torch): every
launch form timed against the stand-in driver (tools/launch_probe/fake_cuda.c, every driver
call returns at once), so each figure is the Python layers, the binding and the C library.

The variant is compiled first with the real toolchain (NVRTC must never meet the stand-in);
a child process then loads it from disk against the stand-in and times the launches. The
torch rows use a stand-in `torch` module (a Tensor type and a current-stream accessor, C-level
callables as torch's are), installed only after the rows without torch: they exercise
specjit's torch paths, not torch's own cost, which only the GPU benchmark (python_launch.py)
measures.

With --instructions N, each form is also run N times under callgrind and its instructions per
launch are counted (the difference to a run of no launches): exact on a busy machine, where
times are not.

Usage: python_launch_probe.py [--build BUILD] [--calls N] [--repeats R] [--instructions N]
                              [--json PATH]
(the specjit package must be importable: tools/python_test.sh's virtual environment, or
PYTHONPATH; `cmake --build BUILD --target specjit_fake_cuda` first)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import types

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from python_bench_kernel import SOURCE, write_report  # noqa: E402

# scale(float* x, long long n, float factor): the stand-in driver's parameter sizes.
_PARAM_SIZES = "8,8,4"


def _kernel(cache: str):
    import specjit
    engine = specjit.Engine(cache_dir=cache, log="off", arch="sm_90a")
    kernel = specjit.Kernel(source=SOURCE, function="scale", engine=engine,
                            params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})
    return engine, kernel


def per_call_ns(fn, calls: int, repeats: int) -> float:
    """The best over repeats of the mean time of `calls` calls, in nanoseconds: on a shared
    machine the least disturbed round is the closest to the path's own cost."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def _stand_in_torch():
    """A module that specjit's torch hooks accept, made of C-level callables as torch's are:
    torch.Tensor (an int subclass whose value is the address: is_cuda a data descriptor,
    data_ptr a method descriptor) and torch._C's raw-stream accessor (abs: -1, "the current
    device", gives 1, the legacy default stream's handle)."""

    class Tensor(int):
        __slots__ = ()
        is_cuda = property(bool)
        data_ptr = int.conjugate

    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch._C = types.ModuleType("torch._C")
    torch._C._cuda_getCurrentRawStream = abs
    torch._C._cuda_getDevice = int
    return torch


def forms(k, torch=None) -> dict:
    """Each launch form as a call of no arguments: without torch, or (torch given) with a
    stand-in tensor and torch's current stream."""
    values = {"BLOCK": 128}
    native = k._native.launch
    if torch is None:
        args = (0, 0, 1.0)
        held = k[1, 128]
        return {
            "kernel[grid, block](...)": lambda: k[1, 128](0, 0, 1.0, values=values),
            "held launcher(...) (k[grid, block] once)": lambda: held(0, 0, 1.0, values=values),
            "kernel.launch(...)": lambda: k.launch(1, 128, args, values=values),
            "kernel.launch(..., stream=int)": lambda: k.launch(1, 128, args, values=values,
                                                               stream=0),
            "native launch (no Python layer)": lambda: native(values, 1, 128, args, 0, None),
            "empty Python lambda": lambda: None,
        }
    x = torch.Tensor(0x7F0000000000)
    args = (x, 0, 1.0)
    return {
        "torch: kernel[grid, block](tensor, ...)": lambda: k[1, 128](x, 0, 1.0, values=values),
        "torch: kernel.launch(tensor, ...)": lambda: k.launch(1, 128, args, values=values),
        "torch: kernel.launch(..., stream=int)": lambda: k.launch(1, 128, args, values=values,
                                                                  stream=0),
        "torch: native launch": lambda: native(values, 1, 128, args, 0, None),
    }


def _loaded_kernel(cache: str):
    engine, k = _kernel(cache)
    variant = k.get(BLOCK=128)
    assert variant.source == "disk", variant
    return engine, k


def child_times(cache: str, calls: int, repeats: int) -> dict:
    engine, k = _loaded_kernel(cache)
    ns = {name: per_call_ns(fn, calls, repeats) for name, fn in forms(k).items()}
    # torch only now: until it is imported, specjit looks for it at each launch.
    sys.modules["torch"] = _stand_in_torch()
    ns.update({name: per_call_ns(fn, calls, repeats)
               for name, fn in forms(k, sys.modules["torch"]).items()})
    stats = engine.stats()
    return {"ns_per_launch": ns, "memory_hits": stats.memory_hits, "compiles": stats.compiles}


def child_loop(cache: str, form: str, calls: int) -> None:
    """`calls` launches of one form, untimed (counted by callgrind from outside)."""
    torch = None
    if form.startswith("torch:"):
        torch = sys.modules["torch"] = _stand_in_torch()
    _, k = _loaded_kernel(cache)
    fn = forms(k, torch)[form]
    for _ in range(100):
        fn()
    for _ in range(calls):
        fn()


def instructions(env: dict, cache: str, names: list, calls: int) -> dict:
    """Instructions per launch of each form: callgrind's count of `calls` launches minus that
    of none (the same process otherwise), over `calls`. Exact where times are noisy."""
    out = {}
    for name in names:
        totals = []
        for n in (0, calls):
            with tempfile.NamedTemporaryFile(suffix=".callgrind") as f:
                subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={f.name}",
                                sys.executable, os.path.abspath(__file__), "--child", cache,
                                "--form", name, "--calls", str(n)],
                               env=env, check=True, capture_output=True)
                summary = [line for line in open(f.name) if line.startswith("summary:")]
                totals.append(int(summary[0].split()[1]))
        out[name] = (totals[1] - totals[0]) / calls
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the CMake build with specjit_fake_cuda")
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--instructions", type=int, metavar="N", default=0,
                    help="also count instructions per launch over N launches (valgrind)")
    ap.add_argument("--json", help="write the full results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--form", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child and args.form:
        child_loop(args.child, args.form, args.calls)
        return 0
    if args.child:
        json.dump(child_times(args.child, args.calls, args.repeats), sys.stdout)
        return 0
    if args.instructions and not shutil.which("valgrind"):
        print("python_launch_probe: --instructions needs valgrind", file=sys.stderr)
        return 2
    stand_in = os.path.join(os.path.abspath(args.build), "tools", "launch_probe")
    if not os.path.exists(os.path.join(stand_in, "libcuda.so.1")):
        print(f"python_launch_probe: no stand-in driver in {stand_in}; run "
              f"`cmake --build {args.build} --target specjit_fake_cuda`", file=sys.stderr)
        return 2
    import specjit
    with tempfile.TemporaryDirectory(prefix="specjit-probe-") as cache:
        _, k = _kernel(cache)
        k.prepare(BLOCK=128)  # NVRTC here, before the stand-in is on the library path
        env = dict(os.environ, SPECJIT_ARCH="sm_90a", FAKE_PARAM_SIZES=_PARAM_SIZES,
                   LD_LIBRARY_PATH=stand_in + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", cache,
                               "--calls", str(args.calls), "--repeats", str(args.repeats)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return 1
        result = json.loads(proc.stdout)
        if args.instructions:
            result["instructions_per_launch"] = instructions(
                env, cache, list(result["ns_per_launch"]), args.instructions)
    ns = result["ns_per_launch"]
    ir = result.get("instructions_per_launch")
    empty = ns["empty Python lambda"]
    print(f"{'launch form (stand-in driver, best of ' + str(args.repeats) + ')':44s} "
          f"{'ns':>8s} {'minus lambda':>13s}" + (f" {'instructions':>13s}" if ir else ""))
    for name, value in ns.items():
        print(f"{name:44s} {value:8.1f} {value - empty:13.1f}" +
              (f" {ir[name]:13.0f}" if ir else ""))
    report = {
        "benchmark": "python_launch_probe",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, stand-in driver",
        "python": platform.python_version(), "specjit": specjit.__version__,
        "calls": args.calls, "repeats": args.repeats, **result,
    }
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
