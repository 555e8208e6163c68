"""specjit.Engine: settings, the kernel cache's front door, and the process-wide default."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ._native import lib


@dataclass(frozen=True)
class EngineStats:
    """Counters of one engine; requests == memory_hits + disk_hits + compiles + failures."""

    requests: int
    memory_hits: int
    disk_hits: int
    compiles: int
    failures: int
    corrupt_entries: int
    write_failures: int
    storms: int


def _setting_text(name: str, value) -> str:
    if isinstance(value, bool):
        raise TypeError(f"Engine({name}=...): give the variable's text, e.g. strict='error'")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ":".join(os.fspath(v) for v in value)
    return str(value)


class Engine:
    """An engine: settings from the SPECJIT_* environment, overridden by keyword arguments named
    like the variables without the prefix, in lower case (``cache_dir``, ``log``, ``strict``,
    ``arch``, ``cache_max_size``, ``storm_threshold``, ``lock_timeout_ms``, ``device``, ...).
    A bad name or value raises InvalidArgumentError naming it."""

    def __init__(self, **overrides):
        self.overrides = dict(overrides)
        pairs = [(k, _setting_text(k, v)) for k, v in overrides.items() if v is not None]
        self._native = lib.NativeEngine(pairs)

    def seal(self) -> None:
        """Warm-up is done: later compiles are logged as ``serving`` (refused with strict=error)."""
        self._native.seal()

    def stats(self) -> EngineStats:
        return EngineStats(*self._native.stats())

    def __repr__(self) -> str:
        return f"specjit.Engine({', '.join(f'{k}={v!r}' for k, v in self.overrides.items())})"


_default: Engine | None = None
_default_lock = threading.Lock()


def default_engine() -> Engine:
    """The process-wide engine (the environment's settings), created on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Engine()
    return _default
