"""The exception hierarchy: one class per specjit_status, each carrying the C library's message."""

from __future__ import annotations


class SpecjitError(Exception):
    """Base of every specjit error; ``status`` is the C ABI's specjit_status code."""

    status = 0

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(SpecjitError, ValueError):
    """A bad handle, value, policy, tensor (dtype, shape, device, layout) or a missing argument."""

    status = 1


class NotFoundError(SpecjitError):
    """A source file, header or include directory is missing."""

    status = 2


class CompileError(SpecjitError):
    """NVRTC rejected the source; the message holds its log."""

    status = 3


class StrictError(SpecjitError):
    """A compile was needed while sealed under SPECJIT_STRICT=error."""

    status = 4


class DriverError(SpecjitError):
    """No CUDA driver, or a driver call failed."""

    status = 5


class CapturingError(SpecjitError):
    """A compile or module load was needed while the stream captures a CUDA graph.

    Warm the variant up (one eager launch) or precompile it before capturing."""

    status = 6


class CacheError(SpecjitError):
    """A cache operation that was asked for failed."""

    status = 7


class InternalError(SpecjitError):
    status = 8


class PrecompileError(SpecjitError):
    """``specjit precompile`` failed; ``summary`` holds its JSON summary when it printed one."""

    def __init__(self, message: str, summary: dict | None = None):
        super().__init__(message)
        self.summary = summary


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, NotFoundError, CompileError, StrictError, DriverError,
                CapturingError, CacheError, InternalError)
}


def from_status(status: int, message: str) -> SpecjitError:
    """The exception for a C status code (the native module raises what this returns)."""
    cls = _BY_STATUS.get(status, SpecjitError)
    error = cls(message)
    if cls is SpecjitError:
        error.status = status
    return error
