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
