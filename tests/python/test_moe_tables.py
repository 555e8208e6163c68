"""tools/bench/moe_tables.py: the doc tables from a bench report and from GPU test logs."""
import json
import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "bench" / "moe_tables.py"

CALL = ("../tests/gpu/fused_moe_support.cpp:358: MESSAGE: Mixtral-8x7B fp8 T={t} ({config}): "
        "rel. error vs emulated {emulated}, vs fp32 0.0265 over 12 rows\n")
E4M3 = ("../tests/gpu/fused_moe_support.cpp:367: MESSAGE:   e4m3 accumulation: vs truth 0.0268, "
        "the emulating reference's 0.02653 (ratio {ratio})\n")


def run(*args):
    done = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_accuracy_rows_name_the_layout_and_the_largest_ratio(tmp_path):
    log = tmp_path / "table.txt"
    log.write_text(CALL.format(t=1, config="m16 g1[wgmma-swap n128 g1 s4] g2[x]", emulated=0.0009)
                   + "  logged: Mixtral-8x7B fp8 T=1\n"
                   + CALL.format(t=4000, config="m128 g1[wgmma n256 g2 s4 e4m3w] g2[y]",
                                 emulated=0.0136)
                   + E4M3.format(ratio=1.0101)
                   + CALL.format(t=1, config="m16 g1[wgmma-swap n128 g1 s4 bulk] g2[x]",
                                 emulated=0.0011))
    rows = [line for line in run("accuracy", f"table={log}").splitlines() if "Mixtral" in line]
    assert len(rows) == 3
    assert rows[0].split(" | ")[2] == "row-major" and rows[0].endswith("|  |  |  |")
    assert rows[1].endswith("| 0.0136 | 0.0268 | 0.02653 | 1.0101 |")
    assert rows[2].split(" | ")[2] == "packed"
    assert "Largest ratio: 1.0101." in run("accuracy", f"table={log}")


def test_figures_print_the_fixed_and_mean_speedups(tmp_path):
    row = {"model": "mixtral-8x7b", "dtype": "fp8", "tokens": 4096, "gemm_us": 3027.8,
           "peer_gemm_us": 2617.4, "speedup_vs_peer": 0.8645, "tflops": 953.2,
           "layer_us": 3060.2, "config": "m128 g1[...]",
           "routing_samples": {"distinct_experts_mean": 8, "gemm_us_mean": 3086.7,
                               "peer_gemm_us_mean": 2660.3, "speedup_vs_peer": 0.8619,
                               "fraction_of_floor": 0.1}}
    report = tmp_path / "moe.json"
    report.write_text(json.dumps({"rows": [row, dict(row, dtype="bf16")]}))
    lines = run("figures", str(report)).splitlines()
    assert len(lines) == 3  # the header, its rule, the FP8 row
    assert lines[2] == ("| Mixtral-8x7B | 4096 | 8.0 | 3027.8 | 2617.4 | 0.86 | 3086.7 | 2660.3 "
                        "| 0.86 | 10 | 953.2 | 3060.2 | `m128 g1[...]` |")
