"""Launch arguments are checked in order, by position, before anything reaches the driver."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import specjit

pytestmark = pytest.mark.runtime_sources


def test_a_host_array_is_refused_naming_its_position(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="argument 0.*CUDA"):
        scale_kernel[1, 128](np.zeros(4, np.float32), 4, 2.0, values={"BLOCK": 128})


def test_an_unsupported_argument_type_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="argument 2: a str"):
        scale_kernel.launch(1, 128, (0, 4, "two"), values={"BLOCK": 128})


def test_an_int_outside_int64_is_refused(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="argument 1.*int64"):
        scale_kernel[1, 128](0, 1 << 70, 2.0, values={"BLOCK": 128})


def test_a_large_buffer_is_not_a_scalar(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="argument 0: a 32-byte buffer"):
        scale_kernel[1, 128](bytes(32), values={"BLOCK": 128})


@pytest.mark.parametrize("grid,match", [(0, r"grid\[0\] = 0"), ((1, 2, 3, 4), "grid"),
                                        ("x", "grid")])
def test_bad_grids_are_named(scale_kernel, grid, match):
    with pytest.raises(specjit.InvalidArgumentError, match=match):
        scale_kernel[grid, 128](0, 4, 2.0, values={"BLOCK": 128})


def test_a_missing_template_value_at_launch_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="'BLOCK'"):
        scale_kernel[1, 128](0, 4, 2.0)


def test_kernel_indexing_needs_grid_and_block(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="grid, block"):
        scale_kernel[1]


def test_a_bad_stream_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="stream"):
        scale_kernel[1, 128](0, 4, 2.0, values={"BLOCK": 128}, stream="s")


@pytest.mark.nodevice
def test_well_formed_arguments_reach_the_driver(scale_kernel):
    # numpy and ctypes scalars pass their own bytes; with no driver the launch itself fails.
    # (On a device this would launch on a null pointer: the gpu tests launch real buffers.)
    with pytest.raises(specjit.DriverError):
        scale_kernel[(1,), (128,)](ctypes.c_void_p(0), np.int64(4), np.float32(2.0),
                                   values={"BLOCK": 128})


# torch's paths, with a stand-in torch module in a fresh interpreter (specjit keeps the hooks it
# found for the life of the process): an exact torch.Tensor is read through the type's own
# is_cuda and data_ptr, a subclass through its attributes, and the default stream is the raw
# accessor's answer for device -1 (the current one).
_STAND_IN_TORCH = """
import sys, types
import specjit
from conftest import SCALE_SOURCE

calls = []

class Tensor:
    def __init__(self, ptr, cuda=True):
        self.ptr, self.cuda = ptr, cuda
    @property
    def is_cuda(self):
        calls.append("is_cuda")
        return self.cuda
    @property
    def device(self):
        return "cuda:0" if self.cuda else "cpu"
    def data_ptr(self):
        calls.append("data_ptr")
        return self.ptr

class Parameter(Tensor):
    def data_ptr(self):
        calls.append("Parameter.data_ptr")
        return self.ptr

def raw_stream(device):
    calls.append(("stream", device))
    return 0

torch = types.ModuleType("torch")
torch.Tensor = Tensor
torch._C = types.ModuleType("torch._C")
torch._C._cuda_getCurrentRawStream = raw_stream
sys.modules["torch"] = torch

e = specjit.Engine(**SETTINGS)
k = specjit.Kernel(source=SCALE_SOURCE, function="scale", engine=e,
                   params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})

def launch(*args, **kw):
    del calls[:]
    try:
        k[1, 128](*args, values={"BLOCK": 128}, **kw)
    except specjit.SpecjitError as err:
        print(type(err).__name__, err, calls)

launch(Tensor(4096), 4, 2.0)
launch(Parameter(4096), 4, 2.0)
launch(Tensor(4096), 4, 2.0, stream=7)
launch(Tensor(4096, cuda=False), 4, 2.0)
"""


@pytest.mark.nodevice
def test_torch_tensors_and_the_current_stream_through_the_hooks(settings):
    from conftest import run_python
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    out = run_python(f"SETTINGS = {settings!r}\n" + _STAND_IN_TORCH,
                     {"PYTHONPATH": here}).splitlines()
    assert out[0].startswith("DriverError") and \
        out[0].endswith("[('stream', -1), 'is_cuda', 'data_ptr']"), out[0]
    assert out[1].endswith("[('stream', -1), 'is_cuda', 'Parameter.data_ptr']"), out[1]
    assert out[2].endswith("['is_cuda', 'data_ptr']"), out[2]  # a given stream asks nothing
    assert out[3].startswith("InvalidArgumentError argument 0: a tensor on the cpu"), out[3]
