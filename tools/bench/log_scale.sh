#!/usr/bin/env bash
# The log benchmark (docs/bench/log-scale.md): writes logs of 10^5 and 10^6 lines
# (tools/bench/make_log.py) and measures `specjit log`, `specjit why` and
# `specjit precompile --from-log` (the replayable variants already cached, so the figure is the
# read, not NVRTC) and `log --html`: wall time, CPU time (user + system) and peak RSS from
# /usr/bin/time -v, and the load average (a shared machine's wall times follow its load). Prints
# one JSON object.
# Usage: tools/bench/log_scale.sh [BUILD_DIR] [LINES...]   (default: build, 100000 1000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(100000 1000000)
cli="$PWD/$build/tools/specjit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SPECJIT_CACHE_DIR="$work/cache" SPECJIT_LOG="$work/run.jsonl" SPECJIT_ARCH=sm_90a
export SPECJIT_CACHE_READONLY_DIRS=
python3 tools/bench/make_log.py 1000 "$work/warm.jsonl"
"$cli" precompile --from-log "$work/warm.jsonl" >/dev/null 2>&1 # the 4 replayable variants

measure() { # NAME ARGS... -> "name": {"seconds": S, "cpu_seconds": C, "max_rss_mb": M}
  local name=$1
  shift
  /usr/bin/time -v "$cli" "$@" >"$work/out" 2>"$work/time" || {
    echo "failed: $*" >&2
    cat "$work/time" >&2
    exit 1
  }
  local wall cpu rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
         for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/time")
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$work/time")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$work/time")
  printf '"%s": {"seconds": %s, "cpu_seconds": %s, "max_rss_mb": %s, "load": %s}' "$name" "$wall" \
    "$cpu" "$rss" "$(cut -d' ' -f1 /proc/loadavg)"
}

baseline=$(/usr/bin/time -f %M "$cli" config 2>&1 >/dev/null | tail -1)
printf '{"date": "%s", "baseline_rss_mb": %.1f, "machine": "%s, %s cores, %s GB RAM", "runs": [' \
  "$(date -u +%F)" "$(echo "$baseline" | awk '{print $1 / 1024}')" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(nproc)" \
  "$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
first=1
for lines in "${sizes[@]}"; do
  log="$work/events-$lines.jsonl"
  python3 tools/bench/make_log.py "$lines" "$log"
  bytes=$(stat -c %s "$log")
  ((first)) || printf ','
  first=0
  printf '\n  {"lines": %s, "bytes": %s, ' "$lines" "$bytes"
  measure log log --file "$log" --json
  printf ', '
  measure why why scale_tokens --file "$log" --json
  printf ', '
  measure from_log precompile --from-log "$log" --json
  printf ', '
  measure html log --file "$log" --html "$work/page.html"
  printf '}'
done
printf '\n]}\n'
