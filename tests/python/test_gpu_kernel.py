"""A user kernel on the GPU: launches on torch's current stream, CUDA-graph capture and replay,
and the capture guard (a variant that would compile during capture raises CapturingError)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.torch, pytest.mark.runtime_sources,
              pytest.mark.settings]

torch = pytest.importorskip("torch", reason="[gpu] needs torch with a CUDA device")

import specjit  # noqa: E402
from conftest import SCALE_SOURCE  # noqa: E402


@pytest.fixture
def kernel(tmp_path):
    engine = specjit.Engine(cache_dir=tmp_path / "c", log=tmp_path / "l.jsonl")
    return specjit.Kernel(source=SCALE_SOURCE, function="scale", engine=engine,
                          params={"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()})


def test_a_user_kernel_scales_a_random_tensor(kernel):
    x = torch.randn(1000, device="cuda")
    want = x * 3.0
    kernel[(1000 + 127) // 128, 128](x, x.numel(), 3.0, values={"BLOCK": 128})
    torch.cuda.synchronize()
    torch.testing.assert_close(x, want)


def test_launch_goes_to_torchs_current_stream(kernel):
    x = torch.randn(1 << 20, device="cuda")
    want = x * 0.5
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel.launch(((1 << 20) // 256,), (256,), (x, x.numel(), 0.5), values={"BLOCK": 256})
        done = torch.cuda.Event()
        done.record()
    done.synchronize()
    torch.testing.assert_close(x, want)


def test_a_parameter_launches_on_a_given_stream(kernel):
    # nn.Parameter is a torch.Tensor subclass (asked by name, not through the type's own getter
    # and method); a torch.cuda.Stream is read through .cuda_stream.
    x = torch.nn.Parameter(torch.randn(1000, device="cuda"), requires_grad=False)
    want = x.detach() * 2.0
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    launch = kernel[(1000 + 127) // 128, 128]
    launch(x, x.numel(), 2.0, values={"BLOCK": 128}, stream=side)
    side.synchronize()
    torch.testing.assert_close(x.detach(), want)


def test_a_host_tensor_is_refused_naming_its_device(kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="argument 0: a tensor on the cpu"):
        kernel[1, 128](torch.zeros(4), 4, 2.0, values={"BLOCK": 128})


def test_a_warm_kernel_captures_and_replays(kernel):
    x = torch.randn(4096, device="cuda")
    kernel[32, 128](x, x.numel(), 1.0, values={"BLOCK": 128})      # warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel[32, 128](x, x.numel(), 2.0, values={"BLOCK": 128})
    for _ in range(3):
        fresh = torch.randn(4096, device="cuda")
        x.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(x, fresh * 2.0)


def test_a_compile_during_capture_is_a_capturing_error(kernel):
    x = torch.randn(4096, device="cuda")
    kernel[32, 128](x, x.numel(), 1.0, values={"BLOCK": 128})
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(specjit.CapturingError) as err:
        with torch.cuda.graph(graph):
            kernel[64, 64](x, x.numel(), 2.0, values={"BLOCK": 64})   # never warmed up
    message = str(err.value)
    assert "scale" in message and "64" in message
    assert "warm" in message or "precompile" in message
    # The stream is usable afterwards and the variant works once warmed up eagerly.
    kernel[64, 64](x, x.numel(), 1.0, values={"BLOCK": 64})
    torch.cuda.synchronize()


def test_the_second_launch_is_a_memory_hit(kernel):
    x = torch.randn(256, device="cuda")
    for _ in range(10):
        kernel[2, 128](x, x.numel(), 1.0, values={"BLOCK": 128})
    stats = kernel.engine.stats()
    assert stats.compiles == 1 and stats.memory_hits == 9
