#!/usr/bin/env bash
# On a GPU host: a change's proof that the built-in ops' outputs are byte for byte those of the
# build before it, and its kernel times beside the old ones. Runs, from a bundle
# (../shared/tools/device-bundle .gpu ...; the old build's specjit-bench in .gpu/old/):
#   1. both builds' `specjit-bench digest` at once (each its own cache), and the GPU test suite,
#      one process per test case, 6 at a time;
#   2. then, on a quiet GPU, `moe` and `inv-rope` of the old build, then the new one.
# Results in $OUT (default ./gpu-out): digest-{old,new}.txt, digest.diff, tests/, bench-*.
# Usage: tools/gpu_compare.sh [TOKENS]   (digest token counts, default 1,16,256,4096)
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out/tests"
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
new=.gpu/bin/specjit-bench old=.gpu/old/specjit-bench tests=.gpu/bin/specjit_gpu_tests
tokens=${1:-1,16,256,4096}
caches=$(mktemp -d)
SPECJIT_CACHE_DIR=$caches/old timeout 420 "$old" digest --tokens "$tokens" \
  >"$out/digest-old.txt" 2>&1 &
SPECJIT_CACHE_DIR=$caches/new timeout 420 "$new" digest --tokens "$tokens" \
  >"$out/digest-new.txt" 2>&1 &
count=$("$tests" --count 2>/dev/null | awk '/passing the current filters/ {print $NF}')
seq 1 "$count" | xargs -P 6 -I{} sh -c \
  "timeout 420 $tests --first={} --last={} >$out/tests/case-{}.txt 2>&1; echo \$? >$out/tests/case-{}.rc"
wait
# Digest lines name the op, model, dtype, T and tensor; the old build's file is the reference.
grep -E '^[a-z]' "$out/digest-old.txt" | sort >"$out/digest-old.sorted"
grep -E '^[a-z]' "$out/digest-new.txt" | sort >"$out/digest-new.sorted"
diff "$out/digest-old.sorted" "$out/digest-new.sorted" >"$out/digest.diff" &&
  echo "digests: identical ($(wc -l <"$out/digest-new.sorted") tensors)" ||
  echo "digests: DIFFER ($(wc -l <"$out/digest.diff") diff lines)"
echo "test cases: $(grep -l '^0$' "$out"/tests/*.rc | wc -l) of $count passed"
for build in old new; do
  bin=${!build}
  SPECJIT_CACHE_DIR=$caches/$build timeout 150 "$bin" moe --dtypes fp8 \
    --json "$out/bench-moe-$build.json" >"$out/bench-moe-$build.txt" 2>&1
  SPECJIT_CACHE_DIR=$caches/$build timeout 90 "$bin" inv-rope \
    --json "$out/bench-inv-rope-$build.json" >"$out/bench-inv-rope-$build.txt" 2>&1
done
rm -rf "$caches"
