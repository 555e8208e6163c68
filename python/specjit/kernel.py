"""specjit.Kernel: a kernel from run-time source, specialized per parameter policy."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .engine import Engine, default_engine
from .errors import InvalidArgumentError
from .policies import Policy, as_policy
from ._native import lib

_SOURCE_TEXT, _SOURCE_FILE = 0, 1


@dataclass(frozen=True)
class Variant:
    """One compiled variant: where it came from (``compiled``, ``disk``, ``memory``) and its
    resources."""

    kernel: str
    name_expression: str
    key: str
    values: dict
    source: str
    registers: int
    spill_bytes: int
    shared_bytes: int
    compile_ms: float

    @staticmethod
    def _from_info(info: dict) -> "Variant":
        info = dict(info)
        info["values"] = json.loads(info.pop("variant_json") or "{}")
        return Variant(**info)


def _kernel_id(function: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", function.split("<")[0]).strip("_") or "kernel"


def _strings(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{what}: expected a list, got a single {type(value).__name__}")
    return [os.fspath(v) for v in value]


def _define_list(defines) -> list[str]:
    if defines is None:
        return []
    if isinstance(defines, Mapping):
        return [k if v is None else f"{k}={v}" for k, v in defines.items()]
    return _strings(defines, "defines")


# kernel[grid, block] returns one (a native type: calling it runs no Python frame).
Launcher = lib.Launcher


class Kernel(lib.KernelBase):
    """A ``template <...> __global__`` function from ``source`` (text) or ``path`` (a file).

    ``params`` maps each parameter name, in template order, to its policy (specjit.dynamic(),
    exact(), bucketed(...), divisibility(n), or the policy's string). A ``dynamic`` parameter
    is not a template parameter: the kernel takes it as an ordinary argument. Values for the
    others are given at launch as ``values={"BLOCK": 128, ...}``; the definition is validated
    (and registered with the engine) here, once.

    Launch with ``kernel[grid, block](*args, values=None, shared_bytes=0, stream=None)`` or
    ``kernel.launch(grid, block, args=(), *, values=None, shared_bytes=0, stream=None)``; the
    stream defaults to torch's current stream when torch is imported. Both are the native
    base's (KernelBase), so that a launch runs no Python code of this package.
    """

    def __init__(self, source: str | None = None, path: str | os.PathLike | None = None, *,
                 function: str, params: Mapping[str, Policy | str] | None = None,
                 include_dirs: Sequence[str | os.PathLike] | None = None,
                 headers: Mapping[str, str] | None = None, defines=None,
                 options: Sequence[str] | None = None, name: str | None = None,
                 engine: Engine | None = None):
        if (source is None) == (path is None):
            raise InvalidArgumentError("Kernel: give exactly one of source= (text) or path=")
        if not function or not isinstance(function, str):
            raise InvalidArgumentError("Kernel: function= must name the __global__ function")
        params = dict(params or {})
        self.function = function
        self.id = name or _kernel_id(function)
        self.params = {k: as_policy(v, k) for k, v in params.items()}
        self.engine = engine or default_engine()
        kind, source_name = ((_SOURCE_TEXT, f"{self.id}.cu") if source is not None
                             else (_SOURCE_FILE, os.fspath(path)))
        self._native = lib.define(
            self.engine._native, self.id, kind, source_name, source or "", function,
            [(k, v.spec) for k, v in self.params.items()],
            _strings(include_dirs, "include_dirs"), list((headers or {}).items()),
            _define_list(defines), _strings(options, "options"))
        self._bind(self._native)

    def prepare(self, **values) -> Variant:
        """Makes the variant for these values ready (compiled or read from disk): no GPU."""
        return Variant._from_info(self._native.prepare(values))

    def get(self, **values) -> Variant:
        """prepare() and load the module on the engine's device."""
        return Variant._from_info(self._native.get(values))

    def __repr__(self) -> str:
        policies = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"specjit.Kernel({self.id!r}, function={self.function!r}, params={{{policies}}})"
