"""tools/bench/moe_table_twin.py: the B side of a tile-table A/B, and its refusals."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "bench" / "moe_table_twin.py"
TABLE = ROOT / "ops" / "moe" / "tables" / "moe-configs.json"
MIXTRAL = (8, 2, 4096, 14336)


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), str(TABLE), *map(str, args)],
                          capture_output=True, text=True)


H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def entry(table, shape, weights="row_major", device=H200):
    return next(e for e in table["entries"]
                if (e["experts"], e["top_k"], e["hidden"], e["intermediate"]) == shape
                and e.get("weights", "row_major") == weights and e.get("device") == device)


def test_only_the_buckets_that_serve_the_token_counts_change(tmp_path):
    out = tmp_path / "twin.json"
    # T = 5 falls in the bucket of max_tokens 16, T = 4096 in the last.
    done = run(out, "--models", "mixtral", "--tokens", "5,4096", "--gemm1", "dynamic=true",
               "tiles=", "--gemm2", "stages=3", "--device", H200)
    assert done.returncode == 0, done.stderr
    base, twin = json.loads(TABLE.read_text()), json.loads(out.read_text())
    old, new = entry(base, MIXTRAL), entry(twin, MIXTRAL)
    changed = [b["max_tokens"] for b, c in zip(old["buckets"], new["buckets"]) if b != c]
    assert changed == [16, 4096]
    last = new["buckets"][-1]
    assert last["gemm1"]["dynamic"] is True and "tiles" not in last["gemm1"]
    assert last["gemm2"]["stages"] == 3
    assert ("mixtral fp8 row_major NVIDIA H200 max_tokens 16: gemm1.dynamic null -> true"
            in done.stdout)
    assert "2 buckets in" in done.stdout
    # Other entries (other models, the packed layout, other devices) are untouched.
    assert entry(twin, MIXTRAL, "packed") == entry(base, MIXTRAL, "packed")
    assert entry(twin, MIXTRAL, device=H100) == entry(base, MIXTRAL, device=H100)
    assert len(twin["entries"]) == len(base["entries"])
    assert [e for e in twin["entries"] if e != new] == [e for e in base["entries"] if e != old]


def test_without_device_every_device_s_entries_change(tmp_path):
    out = tmp_path / "twin.json"
    done = run(out, "--models", "mixtral", "--tokens", "4096", "--gemm2", "stages=2")
    assert done.returncode == 0, done.stderr
    twin = json.loads(out.read_text())
    for device in (H200, H100):
        assert entry(twin, MIXTRAL, device=device)["buckets"][-1]["gemm2"]["stages"] == 2
        assert f"mixtral fp8 row_major {device} max_tokens 4096" in done.stdout
    assert "2 buckets in" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--models", "llama", "--gemm1", "dynamic=true"], "unknown model 'llama'"),
    (["--models", "mixtral"], "nothing to change"),
    (["--tokens", "100000", "--gemm1", "dynamic=true"], "no bucket matched"),
    (["--device", "NVIDIA B200", "--gemm1", "dynamic=true"], "no bucket matched"),
    (["--tokens", "ten", "--gemm1", "dynamic=true"], "expected integers"),
    (["--gemm1", "reads=bulk"], "is not a JSON value"),
    (["--gemm1", "dynamic"], "expected KEY=VALUE"),
])
def test_bad_arguments_exit_2_naming_the_problem(tmp_path, args, message):
    out = tmp_path / "twin.json"
    done = run(out, *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert not out.exists()


def test_check_refuses_a_twin_the_kernels_cannot_run(tmp_path):
    pytest.importorskip("specjit", reason="--check loads the twin through the specjit package")
    good = run(tmp_path / "good.json", "--models", "mixtral", "--tokens", "1024",
               "--gemm1", "dynamic=true", "tiles=", "--check")
    assert good.returncode == 0, good.stderr
    assert "(checked)" in good.stdout
    # Mixtral's T = 16 GEMM1 tile is a packed swap-AB tile (block_n 64), which dynamic refuses.
    bad = run(tmp_path / "bad.json", "--models", "mixtral", "--tokens", "16",
              "--gemm1", "dynamic=true", "--device", H200, "--check")
    assert bad.returncode == 1
    assert "the twin is refused" in bad.stderr and "dynamic needs one warpgroup" in bad.stderr
    assert not (tmp_path / "bad.json").exists() and not (tmp_path / "bad.json.tmp").exists()
