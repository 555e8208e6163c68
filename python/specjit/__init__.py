"""specjit: a JIT compilation cache for CUDA kernels, from Python.

    import specjit
    k = specjit.Kernel(source=src, function="scale",
                       params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})
    k[(blocks,), (128,)](x, n, values={"BLOCK": 128})   # torch's current stream

Importing specjit never imports torch; ``import specjit.ops`` registers the torch custom ops
(torch.ops.specjit.*).
"""

from .errors import (CacheError, CapturingError, CompileError, DriverError, InternalError,
                     InvalidArgumentError, NotFoundError, PrecompileError, SpecjitError,
                     StrictError)
from .policies import Policy, bucketed, divisibility, dynamic, exact
from .engine import Engine, EngineStats, default_engine
from .kernel import Kernel, Launcher, Variant
from .precompile import precompile
from .log import Event, read_log
from ._native import lib as _lib

__version__ = _lib.version()
abi_version = _lib.abi_version()

__all__ = [
    "Engine", "EngineStats", "default_engine", "Kernel", "Launcher", "Variant", "Policy",
    "dynamic", "exact", "bucketed", "divisibility", "precompile", "read_log", "Event",
    "SpecjitError", "InvalidArgumentError", "NotFoundError", "CompileError", "StrictError",
    "DriverError", "CapturingError", "CacheError", "InternalError", "PrecompileError",
]


def __getattr__(name):
    # specjit.ops imports torch: loaded on first access only.
    if name == "ops":
        import importlib
        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'specjit' has no attribute {name!r}")
