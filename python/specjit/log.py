"""The recompilation log (docs/recompilation-log.md) as Python objects, streamed line by line."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from typing import Iterator

from ._cli import setting


@dataclass(frozen=True)
class Event:
    """Fields every event carries; ``raw`` is the whole JSON object."""

    event: str
    kernel: str = ""
    variant: dict = field(default_factory=dict)
    policies: dict = field(default_factory=dict)
    key: str = ""
    ts: str = ""
    pid: int = 0
    v: int = 1
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class CompileEvent(Event):
    ms: float = 0.0
    arch: str = ""
    nvrtc: str = ""
    reason: str = ""
    diff: list = field(default_factory=list)
    phase: str = ""


@dataclass(frozen=True)
class DiskHitEvent(Event):
    ms: float = 0.0
    layer: int = 0
    arch: str = ""


@dataclass(frozen=True)
class CompileFailedEvent(Event):
    log: str = ""
    phase: str = ""


@dataclass(frozen=True)
class EntryCorruptEvent(Event):
    path: str = ""
    detail: str = ""
    moved_aside: bool = False


@dataclass(frozen=True)
class WriteFailedEvent(Event):
    path: str = ""
    detail: str = ""


@dataclass(frozen=True)
class StormEvent(Event):
    param: str = ""
    distinct_values: int = 0
    suggestion: str = ""


EVENT_TYPES = {"compile": CompileEvent, "disk_hit": DiskHitEvent,
               "compile_failed": CompileFailedEvent, "entry_corrupt": EntryCorruptEvent,
               "write_failed": WriteFailedEvent, "storm": StormEvent}


def parse_event(obj: dict) -> Event:
    """The event object of one parsed log line (unknown events and fields are kept in raw)."""
    cls = EVENT_TYPES.get(obj.get("event"), Event)
    known = {f.name for f in fields(cls)} - {"raw"}
    return cls(**{k: v for k, v in obj.items() if k in known}, raw=obj)


def default_log_path() -> str | None:
    """The log this process's settings name (SPECJIT_LOG, else <cache root>/logs/events.jsonl),
    resolved by the library's own configuration; None when the log is off."""
    value = setting("log")
    return None if value == "off" else value


def read_log(path: str | os.PathLike | None = None, *, kernel: str | None = None
             ) -> Iterator[Event]:
    """Yields the events of ``path`` (default: default_log_path()) one line at a time, as the
    CLI's readers do: lines that do not parse are skipped. ``kernel`` keeps one kernel's."""
    if path is None:
        path = default_log_path()
        if path is None:
            return
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or "event" not in obj:
                continue
            if kernel is None or obj.get("kernel") == kernel:
                yield parse_event(obj)
