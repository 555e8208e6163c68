"""Specialization policies, one per kernel parameter (the C ABI's policy strings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Policy:
    """A parameter's policy; ``spec`` is the string the C ABI and the manifests use."""

    spec: str

    def __str__(self) -> str:
        return self.spec


def dynamic() -> Policy:
    """A plain run-time argument: never compiled in, never a new variant."""
    return Policy("dynamic")


def exact() -> Policy:
    """Every distinct value compiled in (a ``storm`` event past SPECJIT_STORM_THRESHOLD)."""
    return Policy("exact")


def bucketed(buckets: str | Iterable[int] = "pow2") -> Policy:
    """The bucket's upper bound compiled in: ``"pow2"`` or ascending bounds like [16, 64, 256]."""
    if isinstance(buckets, str):
        if buckets != "pow2":
            raise ValueError(f"bucketed: expected 'pow2' or a list of bounds, got {buckets!r}")
        return Policy("bucketed(pow2)")
    bounds = [int(b) for b in buckets]
    if not bounds or any(b <= 0 for b in bounds) or bounds != sorted(set(bounds)):
        raise ValueError(f"bucketed: bounds must be positive and ascending, got {bounds}")
    return Policy("bucketed(" + ",".join(map(str, bounds)) + ")")


def divisibility(n: int, one: bool = False) -> Policy:
    """Compiled-in "is a multiple of n" (Triton's default with n=16); ``one``: 1 gets its own."""
    if int(n) < 2:
        raise ValueError(f"divisibility: n must be at least 2, got {n}")
    return Policy(f"divisibility({int(n)})" + ("+one" if one else ""))


def as_policy(value: Policy | str, name: str) -> Policy:
    """A Policy from a Policy or its string; the C library validates the string's syntax."""
    if isinstance(value, Policy):
        return value
    if isinstance(value, str):
        return Policy(value)
    raise TypeError(f"parameter {name!r}: expected a policy (specjit.dynamic(), ...), "
                    f"got {type(value).__name__}")
