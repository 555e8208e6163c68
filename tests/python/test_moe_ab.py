"""tools/bench/moe_ab.py: an A/B's summary, fixed routing and the mean over routings."""
import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "bench" / "moe_ab.py"

ROW = ("mixtral-8x7b      fp8     4     {gemm:.1f}     395.8   262.3   134.0     401.9   28.8     "
       "70%      7.1     291.1   0.74x  m8 g1[wgmma-swap n128 g1 s6 t2 e4m3w] g2[x]\n")
MEAN = ("                          4     {mean:.1f} mean over 20 routings (237.1..394.9), 5.3 "
        "experts, floor 68%, peer 225.9 (mean over 20 routings), 0.74x\n")
OLD_ROW = ("qwen3-30b-a3b     fp8  1024     {gemm:.1f}     241.0   148.0    91.5     268.4     "
           "57%    417.3     201.0   0.84x  m128 g1[y] g2[z]\n")


def run(tmp_path, text):
    log = tmp_path / "ab.txt"
    log.write_text(text)
    done = subprocess.run([sys.executable, str(TOOL), str(log)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_each_tag_gets_its_fixed_and_routings_means_against_the_first(tmp_path):
    text = ""
    for gemm, mean in ((400.0, 300.0), (402.0, 310.0)):
        text += "#### bench base\npeer (FP8 only): ...\n" + ROW.format(gemm=gemm) + \
            MEAN.format(mean=mean) + "full numbers: x.json\n"
        text += "#### bench new\n" + ROW.format(gemm=gemm - 20) + MEAN.format(mean=mean - 30)
    text += "#### other section\n" + ROW.format(gemm=1.0) + MEAN.format(mean=1.0)
    lines = run(tmp_path, text)
    assert lines[0] == "mixtral-8x7b fp8 T=4"
    base, base_mean, new, new_mean = lines[1:5]
    assert "gemm    401.0" in base and "x1.000" in base and "[400.0 402.0]" in base
    assert "routings    305.0" in base_mean and "[300.0 310.0]" in base_mean
    assert "gemm    381.0" in new and "x0.950" in new
    assert "routings    275.0" in new_mean and "x0.902" in new_mean
    assert len(lines) == 5  # the other section's rows are not the A/B's


def test_rows_without_routings_or_host_still_summarize(tmp_path):
    lines = run(tmp_path, "#### bench a\n" + OLD_ROW.format(gemm=240.0) +
                "#### bench b\n" + OLD_ROW.format(gemm=228.0))
    assert lines[0] == "qwen3-30b-a3b fp8 T=1024"
    assert "host" not in lines[1] and "x0.950" in lines[2]
    assert not any("routings" in line for line in lines)


def test_gpu_ab_s_table_lines_come_first(tmp_path):
    text = ("#### table base.json: the entries for 'NVIDIA H200' on 'NVIDIA H100 80GB HBM3'\n"
            "#### bench base\n" + ROW.format(gemm=400.0))
    lines = run(tmp_path, text)
    assert lines[0] == "table base.json: the entries for 'NVIDIA H200' on 'NVIDIA H100 80GB HBM3'"
    assert lines[1] == "mixtral-8x7b fp8 T=4"
