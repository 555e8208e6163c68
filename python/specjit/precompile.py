"""specjit.precompile: make a manifest's variants ready in the cache (NVRTC only, no GPU)."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Mapping, Sequence

from ._cli import run_json
from .errors import PrecompileError


def _from_cwd(path):
    return os.path.abspath(path) if isinstance(path, str) and path else path


def _kernel_from_cwd(kernel):
    if not isinstance(kernel, Mapping):
        return kernel  # the CLI names what is wrong with it
    out = dict(kernel)
    if "source" in out:
        out["source"] = _from_cwd(out["source"])
    if isinstance(out.get("include_dirs"), list):
        out["include_dirs"] = [_from_cwd(d) for d in out["include_dirs"]]
    return out


def _with_absolute_paths(manifest: Mapping) -> dict:
    """A dict has no folder of its own for relative paths to start from (a manifest file's
    are taken from its folder): take them from the current directory, as open() does."""
    out = dict(manifest)
    if isinstance(out.get("kernels"), list):
        out["kernels"] = [_kernel_from_cwd(k) for k in out["kernels"]]
    if isinstance(out.get("models"), list):
        out["models"] = [{**m, "config_table": _from_cwd(m["config_table"])}
                         if isinstance(m, Mapping) and "config_table" in m else m
                         for m in out["models"]]
    return out


def precompile(manifest: str | os.PathLike | Mapping | None = None, *,
               from_log: str | os.PathLike | None = None, arch: str | Sequence[str] | None = None,
               jobs: int | None = None, cache_dir: str | os.PathLike | None = None) -> dict:
    """Runs ``specjit precompile --json`` on ``manifest`` (a path, or a dict written to a temp
    file; a dict's relative paths, such as a kernel's "source" and "include_dirs", are taken
    from the current directory) and returns its summary: {"variants", "compiled", "reused", "failed", "seconds",
    "arches", "failures"}. Raises PrecompileError with the CLI's message when it fails (a bad
    manifest changes nothing; a failed compile is listed in ``error.summary``)."""
    args = ["precompile"]
    with tempfile.TemporaryDirectory(prefix="specjit-manifest-") as tmp:
        if isinstance(manifest, Mapping):
            path = os.path.join(tmp, "manifest.json")
            with open(path, "w") as f:
                json.dump(_with_absolute_paths(manifest), f)
            args += ["--manifest", path]
        elif manifest is not None:
            args += ["--manifest", os.fspath(manifest)]
        if from_log is not None:
            args += ["--from-log", os.fspath(from_log)]
        for a in [arch] if isinstance(arch, str) else (arch or []):
            args += ["--arch", a]
        if jobs is not None:
            args += ["-j", str(int(jobs))]
        if cache_dir is not None:
            args += ["--cache-dir", os.fspath(cache_dir)]
        code, summary, err = run_json(args)
    if code != 0:
        detail = err
        if summary and summary.get("failures"):
            detail = "; ".join(f"{f['kernel']} {f['variant']}: {f['error']}"
                               for f in summary["failures"]) or err
        raise PrecompileError(f"specjit precompile failed (exit {code}): {detail}", summary)
    return summary
