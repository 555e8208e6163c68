#!/usr/bin/env bash
# Runs parts of the GPU suite side by side on one device host (from a device-bundle in .gpu),
# each part its own process and log under $OUT: the suite's long cases are bound by their CPU
# references, so parts in parallel finish in a fraction of the time.
#   tools/gpu_split.sh NAME=ARGS... e.g. e4m3="-tc=GEMM1?on?e4m3*" swap="-tc=every?GEMM*"
# An argument ENV:VAR=VALUE before a part's arguments sets that variable for the part only:
#   split="ENV:SPECJIT_FORCED_ONLY=swap,split -tc=every?GEMM*"
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
pids=()
names=()
for part in "$@"; do
  name=${part%%=*}
  args=()
  envs=()
  for word in ${part#*=}; do
    if [[ $word == ENV:* ]]; then envs+=("${word#ENV:}"); else args+=("$word"); fi
  done
  (env "${envs[@]}" .gpu/bin/specjit_gpu_tests "${args[@]}" >"$out/$name.txt" 2>&1; echo "rc=$?" >>"$out/$name.txt") &
  pids+=($!)
  names+=("$name")
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  echo "== ${names[$i]}: $(tail -4 "$out/${names[$i]}.txt" | tr '\n' ' ')"
done
