#!/usr/bin/env bash
# What specjit's launch path itself costs, on any machine (no GPU): launch_loop against the
# stand-in driver, timed, then (where valgrind is installed) its instructions per launch.
# Usage: tools/launch_probe/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
cmake --build "$build" --target specjit_fake_cuda specjit_launch_loop >/dev/null
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export SPECJIT_ARCH=sm_90a
"$build/tools/specjit_launch_loop" "$cache" prepare
export LD_LIBRARY_PATH=$PWD/$build/tools/launch_probe${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$build/tools/specjit_launch_loop" "$cache" 2000000
command -v valgrind >/dev/null || exit 0
n=100000
for loop in loop_raw loop_kernel loop_variant; do
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$loop" \
    "$build/tools/specjit_launch_loop" "$cache" "$n" >/dev/null 2>&1
  total=$(awk '/^summary:/ {print $2}' "$out")
  rm -f "$out"
  # 5 rounds of n launches each were counted.
  printf '%-40s %8.1f\n' "instructions per launch, $loop" "$(echo "$total / (5 * $n)" | bc -l)"
done
