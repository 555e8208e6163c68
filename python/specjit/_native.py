"""The nanobind module over the C ABI, with the error factory installed before first use."""

from . import _specjit as lib  # noqa: F401  (re-exported)
from .errors import from_status

lib.set_error_factory(from_status)
