#!/usr/bin/env bash
# F1: libFuzzer on the readers of bytes others write (tests/fuzz; docs/reliability.md lists them).
#   tools/fuzz.sh           the bounded run CI does (ctest label `fuzz`, 20000 runs each)
#   tools/fuzz.sh long      10^6 executions each (docs/reliability.md has the last result)
# With GCC the targets link libFuzzer's runtime from libclang-rt-14-dev (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: installing libclang-rt-14-dev"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libclang-rt-14-dev >/dev/null
fi
cmake -S . -B build-fuzz -G Ninja -DSPECJIT_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target specjit_fuzz_entry specjit_fuzz_manifest specjit_fuzz_log specjit_fuzz_moe_table \
  specjit_fuzz_export specjit_fuzz_remote_value specjit_fuzz_deps_manifest
if [[ ${1:-} == long ]]; then
  for target in entry manifest log moe_table export remote_value deps_manifest; do
    # New inputs go to a scratch corpus; the seeds in the tree are only read.
    mkdir -p build-fuzz/corpus-long-$target
    build-fuzz/tests/fuzz/specjit_fuzz_$target -runs=1000000 -max_len=65536 -use_value_profile=1 \
      build-fuzz/corpus-long-$target tests/fuzz/corpus/$target
  done
else
  (cd build-fuzz && ctest -L fuzz --output-on-failure)
fi
