"""What the Python benchmarks share: the kernel they launch (one store per thread, nothing
when n = 0) and how they write their JSON."""

SOURCE = r"""
template <int BLOCK>
__global__ void scale(float* x, long long n, float factor) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] *= factor;
}
"""


def write_report(path, report: dict) -> None:
    """The full numbers as JSON (docs/bench/ keeps one current file per benchmark)."""
    if path:
        import json
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
