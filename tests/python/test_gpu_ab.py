"""tools/gpu_ab.sh: each table runs as one device's entries, without device names."""
import json
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "ops" / "moe" / "tables" / "moe-configs.json"

# Stands in for the bench: prints the devices and entry count of the table it is given.
FAKE_BENCH = """#!/usr/bin/env python3
import json, sys
table = json.load(open(sys.argv[sys.argv.index("--table") + 1]))
print("ran", len(table["entries"]), sorted({e.get("device", "") for e in table["entries"]}),
      sys.argv[0].split("/")[-3])
"""


def add_bench(bundle):
    bench = bundle / "bin" / "specjit-bench"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(FAKE_BENCH)
    bench.chmod(0o755)


def run_ab(tmp_path, *pairs, device=None):
    add_bench(tmp_path / ".gpu")
    env = dict(os.environ, OUT=str(tmp_path / "out"), PATH="/usr/bin:/bin")  # no nvidia-smi
    if device:
        env["AB_DEVICE"] = device
    done = subprocess.run(["bash", str(ROOT / "tools" / "gpu_ab.sh"), "1", "--dtypes fp8", *pairs],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    return done.returncode, (tmp_path / "out" / "ab.txt").read_text().splitlines()


def entries_of(device):
    return sum(e.get("device") == device for e in json.loads(TABLE.read_text())["entries"])


def test_the_first_device_s_entries_without_their_names_when_the_host_has_none(tmp_path):
    rc, lines = run_ab(tmp_path, f"base={TABLE}")
    assert rc == 0, lines
    assert "the entries for 'NVIDIA H200'" in lines[0]
    assert lines[-1] == f"ran {entries_of('NVIDIA H200')} [''] .gpu"


def test_ab_device_picks_another_device_s_entries(tmp_path):
    rc, lines = run_ab(tmp_path, f"base={TABLE}", device="NVIDIA H100 80GB HBM3")
    assert rc == 0, lines
    assert lines[-1] == f"ran {entries_of('NVIDIA H100 80GB HBM3')} [''] .gpu"


def test_a_device_the_table_lacks_is_refused(tmp_path):
    rc, lines = run_ab(tmp_path, f"base={TABLE}", device="NVIDIA B200")
    assert rc != 0
    assert not any(line.startswith("ran") for line in lines)


def test_an_arm_with_a_bundle_runs_that_build_s_bench(tmp_path):
    add_bench(tmp_path / "old")
    rc, lines = run_ab(tmp_path, f"base={TABLE}", f"old={TABLE}@old")
    assert rc == 0, lines
    assert [line.split()[-1] for line in lines if line.startswith("ran")] == [".gpu", "old"]
