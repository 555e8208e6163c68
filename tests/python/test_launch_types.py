"""kernel[grid, block] and kernel.launch, the native launch forms: their keywords, the Launcher
they return, and the errors a call gets before anything reaches the driver."""

from __future__ import annotations

import pytest

import specjit

pytestmark = pytest.mark.runtime_sources

V = {"BLOCK": 128}


def test_a_launcher_keeps_its_grid_and_block(scale_kernel):
    held = scale_kernel[1, 128]
    other = scale_kernel[(2, 3), [64, 2]]
    assert held is not other
    assert held.grid == (1, 1, 1) and held.block == (128, 1, 1)
    assert other.grid == (2, 3, 1) and other.block == (64, 2, 1)
    del other
    again = scale_kernel[7, 32]  # may reuse a launcher nobody holds, never a held one
    assert held.grid == (1, 1, 1) and again.grid == (7, 1, 1)
    assert "scale" in repr(held) and "grid=(1, 1, 1)" in repr(held)


def test_a_launcher_is_only_made_by_indexing_a_kernel():
    with pytest.raises(TypeError):
        specjit.Launcher()


def test_a_bad_grid_is_refused_when_the_kernel_is_indexed(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match=r"block\[1\] = 0"):
        scale_kernel[1, (32, 0)]
    with pytest.raises(specjit.InvalidArgumentError, match="grid: an int or a sequence"):
        scale_kernel["x", 32]


def test_launch_takes_grid_block_and_args_by_keyword(scale_kernel):
    # The checks of the arguments run: the keywords reached them.
    with pytest.raises(specjit.InvalidArgumentError, match="argument 2: a str"):
        scale_kernel.launch(grid=1, block=128, args=[0, 4, "two"], values=V)


@pytest.mark.parametrize("call,match", [
    (lambda k: k.launch(1, 128, (), 5), "at most 3 positional"),
    (lambda k: k.launch(1, 128, grid=2), "multiple values for argument 'grid'"),
    (lambda k: k.launch(1), "missing required argument 'block'"),
    (lambda k: k.launch(block=1), "missing required argument 'grid'"),
    (lambda k: k.launch(1, 128, (), valuez=V), "unexpected keyword argument 'valuez'"),
    (lambda k: k[1, 128](0, 4, 2.0, values=V, grid=3), "unexpected keyword argument 'grid'"),
])
def test_a_call_python_would_refuse_is_a_type_error(scale_kernel, call, match):
    with pytest.raises(TypeError, match=match):
        call(scale_kernel)


def test_args_must_be_a_sequence(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="args: expected a sequence"):
        scale_kernel.launch(1, 128, 5, values=V)


@pytest.mark.parametrize("shared", [-1, 1 << 32, "4k", 1.5])
def test_bad_shared_bytes_are_named(scale_kernel, shared):
    with pytest.raises(specjit.InvalidArgumentError, match="shared_bytes"):
        scale_kernel[1, 128](0, 4, 2.0, values=V, shared_bytes=shared)


@pytest.mark.parametrize("stream", [-1, 1 << 64])
def test_an_int_that_is_no_stream_handle_is_named(scale_kernel, stream):
    with pytest.raises(specjit.InvalidArgumentError, match="stream"):
        scale_kernel.launch(1, 128, (0, 4, 2.0), values=V, stream=stream)


def test_a_stream_object_needs_an_int_handle(scale_kernel):
    class Stream:
        cuda_stream = "s"
    with pytest.raises(specjit.InvalidArgumentError, match="cuda_stream is a str"):
        scale_kernel.launch(1, 128, (0, 4, 2.0), values=V, stream=Stream())


@pytest.mark.parametrize("values,match", [
    ({"BLOCK": "128"}, "value of BLOCK: expected an int, got a str"),
    ({"BLOCK": 1 << 70}, "value of BLOCK: outside int64"),
    ({"BLOCK": 128, "BLOK": 1}, "no parameter named 'BLOK'"),
    ({"num_tokens": 3}, "missing the value of parameter 'BLOCK'"),
    ([128], "1 values for 2 parameters"),
    (7, "values must be a dict"),
])
def test_bad_values_at_launch_are_named(scale_kernel, values, match):
    with pytest.raises(specjit.InvalidArgumentError, match=match):
        scale_kernel[1, 128](0, 4, 2.0, values=values)


@pytest.mark.nodevice
@pytest.mark.parametrize("values", [
    {"BLOCK": 128, "num_tokens": 4},            # a dynamic value may be given
    {"".join(["BLO", "CK"]): 128},               # a key equal to the name, not the same object
    {"BLOCK": True},                             # an int subclass, read through __index__
    [4, 128],                                    # parameter order
])
def test_every_form_of_values_reaches_the_driver(scale_kernel, values):
    with pytest.raises(specjit.DriverError):
        scale_kernel[1, 128](0, 4, 2.0, values=values)


@pytest.mark.nodevice
def test_a_launch_with_keywords_only_reaches_the_driver(scale_kernel):
    with pytest.raises(specjit.DriverError):
        scale_kernel.launch(stream=0, shared_bytes=0, values=V, args=(0, 4, 2.0), block=128,
                            grid=(1,))
