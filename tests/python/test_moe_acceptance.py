"""tools/bench/moe_acceptance.py: each MoE target point judged on a report's rows."""
import json
import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "bench" / "moe_acceptance.py"
MIXTRAL = {"model": "mixtral-8x7b", "dtype": "fp8", "top_k": 2, "hidden": 4096,
           "intermediate": 14336}


def row(tokens, gemm, peer, fraction, mean=None, peer_mean=None, mean_fraction=None):
    r = dict(MIXTRAL, tokens=tokens, gemm_us=gemm, peer_gemm_us=peer, fraction_of_floor=fraction)
    if mean is not None:
        r["routing_samples"] = {"gemm_us_mean": mean, "peer_gemm_us_mean": peer_mean,
                                "fraction_of_floor": mean_fraction}
    return r


def run(tmp_path, report):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps(report))
    done = subprocess.run([sys.executable, str(TOOL), str(path)], capture_output=True, text=True)
    return done.returncode, done.stdout.splitlines()


def point_cells(lines, tokens):
    line = next(l for l in lines if l.startswith("mixtral-8x7b") and l.split()[1] == str(tokens))
    return line.split()[-3:]


def test_every_point_is_judged_on_both_routings(tmp_path):
    report = {"machine": {"gpu": "NVIDIA H200"}, "peer": {"compared": True}, "rows": [
        # Faster on the fixed routing, slower on the mean: not faster than the peer.
        row(4, 280.0, 291.1, 0.95, mean=230.0, peer_mean=225.9, mean_fraction=0.91),
        # Faster on both, at 92 % of the floor on the mean (89 % fixed: the mean decides).
        row(16, 320.0, 330.4, 0.89, mean=321.0, peer_mean=330.4, mean_fraction=0.92),
        # T = 1: 75 % is enough.
        row(1, 90.0, 102.4, 0.76),
        # 1.2x on both routings.
        row(1024, 590.0, 717.2, 0.4, mean=680.0, peer_mean=828.0, mean_fraction=0.4),
        # 1.2x would need 2181 us for 2.89 TFLOP: past 1300 TFLOP/s, marked a limit.
        row(4096, 2600.0, 2617.4, 0.12, mean=2650.0, peer_mean=2660.3, mean_fraction=0.12),
    ]}
    rc, lines = run(tmp_path, report)
    assert rc == 2, lines  # not every point met
    assert point_cells(lines, 4) == ["NO", "-", "yes"]
    assert point_cells(lines, 16) == ["yes", "-", "yes"]
    assert point_cells(lines, 1) == ["yes", "-", "yes"]
    assert point_cells(lines, 1024) == ["yes", "yes", "-"]
    assert point_cells(lines, 4096) == ["yes", "NO(limit)", "-"]
    assert "peer: 4 of 5" in lines and "1.2x: 1 of 2" in lines and "floor: 3 of 3" in lines
    assert lines[-1].endswith(": 1")


def test_all_points_met_exits_zero(tmp_path):
    report = {"rows": [row(64, 300.0, 334.3, 0.95, mean=300.0, peer_mean=334.0,
                           mean_fraction=0.95)]}
    rc, lines = run(tmp_path, report)
    assert rc == 0, lines
    assert "peer: 1 of 1" in lines


def test_a_report_from_another_gpu_has_nothing_to_judge(tmp_path):
    other = dict(MIXTRAL, tokens=4, gemm_us=400.0, fraction_of_floor=0.7)
    rc, lines = run(tmp_path, {"machine": {"gpu": "NVIDIA H100 80GB HBM3"},
                               "peer": {"compared": False}, "rows": [other]})
    assert rc == 1
    assert "not the one the peer was measured on" in lines[-1]
