#!/usr/bin/env bash
# On a GPU host, from a bundle (tools/gpu_run.sh): an A/B of `specjit-bench moe` over tile tables,
# run alternately in ROUNDS rounds on one GPU, each run's rows under a `#### bench TAG` marker in
# $OUT/NAME.txt (default ab), which tools/bench/moe_ab.py summarizes here.
# Each table runs as a copy holding one device's entries without their "device" names, so that
# those tiles run on whatever Hopper GPU the host has (an entry naming "NVIDIA H200" leaves the
# default rule to decide on an H100, and the A/B would compare nothing): the entries for the
# host's GPU where the table has some, else those of the first device it names; $AB_DEVICE
# picks another. The log says which.
# TAG=TABLE@BUNDLE: that run is another build's, BUNDLE/bin/specjit-bench with BUNDLE/lib first
# (an A/B of two builds: device-bundle the other build into, say, .gpu/old). The bench links
# the ops and the JIT statically, so a build is its bench, not only its libspecjit.
# Usage: tools/gpu_ab.sh ROUNDS "BENCH ARGS" TAG=TABLE[@BUNDLE] [TAG=TABLE[@BUNDLE]...]
#   (log name: $AB_NAME)
#   e.g. tools/gpu_ab.sh 2 "--dtypes fp8 --models mixtral --tokens 4,64 --routings 20" \
#          base=ops/moe/tables/moe-configs.json new=.gpu/tables/new.json
#        tools/gpu_ab.sh 2 "--dtypes fp8" old=ops/moe/tables/moe-configs.json@.gpu/old \
#          new=ops/moe/tables/moe-configs.json
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
rounds=$1 args=$2
shift 2
log="$out/${AB_NAME:-ab}.txt"
json=$(mktemp -d) # each run's report and table copy; the rows in the log are what the A/B reads
table_of() { # TAG=TABLE[@BUNDLE] -> TABLE
  local spec=${1#*=}
  echo "${spec%%@*}"
}
bundle_of() { # TAG=TABLE[@BUNDLE] -> BUNDLE, else .gpu
  local spec=${1#*=}
  [[ $spec == *@* ]] && echo "${spec#*@}" || echo .gpu
}
host=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null)
for pair in "$@"; do
  python3 -c 'import json, sys
table = json.load(open(sys.argv[1]))
named = [e.get("device", "") for e in table["entries"]]
device = sys.argv[3] or (sys.argv[4] if sys.argv[4] in named else (named or [""])[0])
if sys.argv[3] and device not in named:
    sys.exit(f"gpu_ab: {sys.argv[1]} has no entries for {device!r}")
table["entries"] = [e for e in table["entries"] if e.get("device", "") == device]
for entry in table["entries"]:
    entry.pop("device", None)
json.dump(table, open(sys.argv[2], "w"))
shown = repr(device) if device else "any device"
print(f"#### table {sys.argv[1]}: the entries for {shown} on {sys.argv[4]!r}")' \
    "$(table_of "$pair")" "$json/${pair%%=*}.table.json" "${AB_DEVICE:-}" "$host" >>"$log" ||
    exit 1
done
for ((round = 1; round <= rounds; ++round)); do
  for pair in "$@"; do
    echo "#### bench ${pair%%=*} round $round $(date -u +%H:%M:%S)" >>"$log"
    bundle=$(bundle_of "$pair")
    # shellcheck disable=SC2086 # the bench arguments are words
    LD_LIBRARY_PATH="$bundle/lib:$LD_LIBRARY_PATH" \
      "$bundle/bin/specjit-bench" moe $args --table "$json/${pair%%=*}.table.json" \
      --json "$json/${pair%%=*}-$round.json" >>"$log" 2>&1 ||
      echo "#### failed: ${pair%%=*} round $round (exit $?)" | tee -a "$log"
  done
done
