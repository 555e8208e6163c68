#!/usr/bin/env bash
# Runs the GPU tests and the benchmarks on a device host from a bundle made by
# ../shared/tools/device-bundle (.gpu/bin, .gpu/lib). Results go to $OUT (or ./gpu-out).
#   tools/gpu_run.sh [tests|split|bench|moe|precompile|tp-startup|embed|probes|all]
# split: the GPU tests in eight parts side by side (tools/gpu_split.sh), a log each under $OUT;
# the fused MoE cases' CPU references bound the suite, so this takes a fraction of `tests`.
# embed: the C ABI's and user kernels' GPU tests, the C-ABI launch benchmark and the Python
# package (tools/gpu_python.sh against the prefix in .gpu/prefix).
# moe: the fused MoE figures (FP8, fixed routing and 20 routings, the built-in table) and their
# check against the targets (tools/bench/moe_acceptance.py; not part of `all`).
# probes: the device probes of tools/probes, built here with nvcc (not part of `all`), a log each.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bin=.gpu/bin
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
if [[ $what == tests || $what == all ]]; then
  "$bin/specjit_gpu_tests" 2>&1 | tee "$out/gpu_tests.txt" | tail -25
fi
if [[ $what == split ]]; then
  # Each fused MoE case of the suite's long ones a part (the forced families three), the rest one.
  OUT=$out tools/gpu_split.sh \
    e4m3="-tc=GEMM1?on?e4m3?tensor?cores?meets*" \
    whole="-tc=GEMM1?on?e4m3*whole*" \
    sorted="-tc=GEMM1?on?the?sorted*" \
    swap="ENV:SPECJIT_FORCED_ONLY=swap,split -tc=every?GEMM?kernel*" \
    sk="ENV:SPECJIT_FORCED_ONLY=stream_k,dynamic,dynamic_normal,normal -tc=every?GEMM?kernel*" \
    f16="ENV:SPECJIT_FORCED_ONLY=f16_tokens,mma -tc=every?GEMM?kernel*" \
    table="-tc=the?built-in?table*" \
    rest="-tce=every?GEMM?kernel*,GEMM1?on?*,the?built-in?table*"
fi
if [[ $what == bench || $what == all ]]; then
  "$bin/specjit-bench" engine --json "$out/engine-h200.json" 2>&1
  "$bin/specjit-bench" inv-rope --json "$out/inv-rope-h200.json" 2>&1
  "$bin/specjit-bench" inv-rope --groups 1 --heads-per-group 1 --json "$out/inv-rope-1x1-h200.json" \
    2>&1 | tail -14
  "$bin/specjit-bench" moe --dtypes fp8 --table ops/moe/tables/moe-configs.json \
    --json "$out/moe-h200-table.json" 2>&1 | tail -22
  "$bin/specjit-bench" recompile-trace --out "$out/recompile-trace-h200.json" 2>&1 |
    grep -v warning
fi
if [[ $what == tp-startup || $what == all ]]; then
  # The device-drawn inputs first (seeded, normal, in range), then eight ranks on every visible
  # GPU (one GPU: all eight share it), cold then warm.
  "$bin/specjit_gpu_tests" -sf='*device_random_gpu_test*' 2>&1 | tail -4
  "$bin/specjit-bench" tp-startup --ranks 8 --json "$out/tp-startup-h200.json" 2>&1
fi
if [[ $what == embed || $what == all ]]; then
  "$bin/specjit_gpu_tests" -sf='*capi_gpu_test*,*cute_kernel_gpu_test*,*engine_gpu_test*' 2>&1 |
    tee "$out/gpu_tests_embed.txt" | tail -25
  "$bin/specjit-bench" capi --json "$out/capi-launch-h200.json" 2>&1
  SPECJIT_PREFIX=$PWD/.gpu/prefix OUT=$out/python C_BASELINE_JSON=$out/capi-launch-h200.json \
    tools/gpu_python.sh 2>&1 | tail -60
fi
if [[ $what == moe ]]; then
  "$bin/specjit-bench" moe --dtypes fp8 --routings 20 --json "$out/moe.json" 2>&1 |
    tee "$out/moe.txt" | grep -v warning
  python3 tools/bench/moe_acceptance.py "$out/moe.json" 2>&1 | tee "$out/moe-acceptance.txt"
fi
if [[ $what == probes ]]; then
  # The decode probes first (the one-launch question at T = 1-16), then the rest; each one's
  # build and run in its own log, none stopping the others.
  for probe in decode_stream cvt_rate gemm2_loop tma_ingress wgmma_rate; do
    for arg in "" $([[ $probe == decode_stream ]] && echo large); do
      log="$out/probe-$probe${arg:+-$arg}.txt"
      nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels_src \
        -o "$out/$probe" "tools/probes/$probe.cu" -L/usr/local/cuda/lib64/stubs -lcuda \
        >"$log" 2>&1 &&
        timeout 300 "$out/$probe" $arg >>"$log" 2>&1
      echo "$probe $arg: exit $?" | tee -a "$out/probes.txt"
      rm -f "$out/$probe"
    done
  done
fi
if [[ $what == precompile || $what == all ]]; then
  # The built-in default manifest, and a 50-variant manifest, at -j1 and -j<cores>.
  for manifest in "" docs/bench/precompile-bench-manifest.json; do
    for j in 1 $(nproc); do
      dir=$(mktemp -d)
      echo "manifest=${manifest:-default} j=$j" | tee -a "$out/precompile.txt"
      "$bin/specjit" precompile --cache-dir "$dir" -j "$j" ${manifest:+--manifest $manifest} --json \
        | tr -d '\n ' | tee -a "$out/precompile.txt"
      echo | tee -a "$out/precompile.txt"
      rm -rf "$dir"
    done
  done
fi
