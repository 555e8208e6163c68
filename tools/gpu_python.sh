#!/usr/bin/env bash
# On the GPU host (torch, nanobind and scikit-build-core installed, no network): installs the
# package from python/ against a carried specjit prefix, runs the Python tests (the GPU ones
# too), the Python benchmarks and the serving replay; everything lands under $OUT.
# Usage: SPECJIT_PREFIX=/path/to/prefix OUT=/path/to/results [C_BASELINE_JSON=capi.json] \
#          tools/gpu_python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SPECJIT_PREFIX:?set SPECJIT_PREFIX (or CMAKE_PREFIX_PATH) to the installed specjit}"
out=${OUT:-$PWD/build/gpu-python}
mkdir -p "$out"
python=${PYTHON:-python3}
target=$(mktemp -d "${TMPDIR:-/tmp}/specjit-python.XXXXXX")
export CMAKE_PREFIX_PATH=$SPECJIT_PREFIX${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
"$python" -m pip install --no-build-isolation --no-deps --target "$target" ./python \
  >"$out/pip-install.txt" 2>&1 || { tail -30 "$out/pip-install.txt"; exit 1; }
export PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH}
export SPECJIT_CACHE_DIR=${SPECJIT_CACHE_DIR:-$target/cache}
status=0
run() { # name, command...: output to $out/name.txt, status remembered
  local name=$1; shift
  echo "== $name: $*"
  set +e # a failure is counted, never ends the script
  "$@" 2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  set -e
  ((rc == 0)) || { echo "== $name: exit $rc" | tee -a "$out/$name.txt"; status=1; }
}
run pytest-gpu "$python" -X faulthandler -m pytest tests/python -m gpu -rs -v -p no:cacheprovider
# A crash after the tests (at interpreter exit) shows only as the exit status: get the native
# stack where gdb is installed.
if grep -q "exit 1[0-9][0-9]" <<<"$(tail -1 "$out/pytest-gpu.txt")" && command -v gdb >/dev/null; then
  gdb -q -batch -ex run -ex bt -ex "thread apply all bt 12" --args "$python" -m pytest \
    tests/python -m gpu -q -p no:cacheprovider >"$out/pytest-gpu-gdb.txt" 2>&1 || true
fi
run pytest-all "$python" -m pytest tests/python -rs -q -p no:cacheprovider
# C_BASELINE_JSON: specjit-bench capi's results (tools/gpu_run.sh embed sets it), whose raw
# cuLaunchKernel from C the Python figures are compared with.
run bench-launch "$python" tools/bench/python_launch.py --json "$out/python-launch-h200.json" \
  ${C_BASELINE_JSON:+--c-baseline-json "$C_BASELINE_JSON"}
run bench-first-launch "$python" tools/bench/python_first_launch.py \
  --json "$out/python-first-launch-h200.json"
run serving-replay "$python" examples/python/serving_replay.py --json "$out/serving-replay-h200.json"
exit $status
