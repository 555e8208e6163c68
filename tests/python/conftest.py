"""Shared fixtures of the Python package's tests. Tests that need torch or a CUDA device are
marked and skip visibly: "SKIPPED [torch] ..." / "SKIPPED [gpu] ..." (run with -rs)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

SCALE_SOURCE = r"""
template <int BLOCK>
__global__ void scale(float* x, long long n, float factor) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] *= factor;
}
"""


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _has_gpu() -> bool:
    if not _has_torch():
        return False
    import torch
    return torch.cuda.is_available()


def _has_device() -> bool:
    """A CUDA driver with at least one device (torch or not)."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and \
        count.value > 0


def _runtime_sources_missing() -> str | None:
    """The library's message when it cannot define kernels from run-time source yet."""
    import specjit
    try:
        specjit.Kernel(source="__global__ void probe() {}", function="probe",
                       engine=specjit.default_engine())
    except specjit.InternalError as e:
        return str(e)
    except specjit.SpecjitError:
        return None
    return None


def _settings_broken() -> str | None:
    """The library's message when it refuses the settings handles it creates (overrides)."""
    import specjit
    try:
        specjit.Engine(log="off")
    except specjit.InvalidArgumentError as e:
        return str(e) if "not a handle specjit created" in str(e) else None
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: needs torch (skips as [torch] without it)")
    config.addinivalue_line("markers", "settings: makes engines with overrides (skips as "
                            "[settings] where libspecjit refuses its own settings handles)")
    config.addinivalue_line("markers", "runtime_sources: defines kernels from run-time source "
                            "(skips as [runtime_sources] where libspecjit cannot)")
    config.addinivalue_line("markers", "gpu: needs torch and a CUDA device (skips as [gpu])")
    config.addinivalue_line("markers", "nodevice: checks the behaviour without a CUDA device "
                            "(skips as [nodevice] where one is present)")


def pytest_collection_modifyitems(config, items):
    has_torch = _has_torch()
    has_gpu = has_torch and _has_gpu()
    has_device = _has_device()
    missing = _runtime_sources_missing()
    broken = _settings_broken()
    for item in items:
        uses_settings = "settings" in item.keywords or "settings" in item.fixturenames
        if uses_settings and broken:
            item.add_marker(pytest.mark.skip(reason=f"[settings] {broken}"))
        if "runtime_sources" in item.keywords and missing:
            item.add_marker(pytest.mark.skip(reason=f"[runtime_sources] {missing}"))
        if "nodevice" in item.keywords and has_device:
            item.add_marker(pytest.mark.skip(reason="[nodevice] a CUDA device is present; "
                                             "the gpu tests launch for real"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="[gpu] needs torch with a CUDA device"))
        elif "torch" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason="[torch] torch is not installed"))


@pytest.fixture
def settings(tmp_path):
    """Engine settings of an isolated cache and log under tmp_path."""
    return {"cache_dir": str(tmp_path / "cache"), "log": str(tmp_path / "events.jsonl")}


@pytest.fixture
def engine(settings):
    import specjit
    return specjit.Engine(**settings)


@pytest.fixture
def scale_kernel(engine):
    import specjit
    return specjit.Kernel(source=SCALE_SOURCE, function="scale",
                          params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()},
                          engine=engine)


def run_python(code: str, env_extra: dict | None = None) -> str:
    """Runs ``code`` in a fresh interpreter (this one's), returns its stdout; fails loudly."""
    env = dict(os.environ)
    for name, value in (env_extra or {}).items():
        # PYTHONPATH is extended, never replaced: the package may be installed through it.
        if name == "PYTHONPATH" and env.get(name):
            value = value + os.pathsep + env[name]
        env[name] = value
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout
