#!/usr/bin/env bash
# Builds the test suite under AddressSanitizer + UndefinedBehaviorSanitizer and under
# ThreadSanitizer, each in a build directory of its own, and runs the tests:
#   ASan+UBSan (build-asan): every label except gpu (no device needed) — unit, process and
#                            reliability tests; the helper processes are instrumented too. Not
#                            capi/install_test: its examples are built uninstrumented against
#                            the instrumented library, which the ASan runtime refuses to load.
#   TSan (build-tsan):       the thread-heavy tests — runtime/engine_test "concurrent requests"
#                            and reliability A6 (4 processes x 8 threads, helper under TSan).
# Usage: tools/sanitize.sh [asan|tsan|all]   (JOBS=n to change the build parallelism)
# A sanitizer report fails the test that produced it (halt_on_error / a non-zero exit).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
jobs="${JOBS:-$(nproc)}"

# NVRTC and the CUDA driver are not instrumented; their own allocations at exit are not ours.
mkdir -p build-asan
cat > build-asan/lsan.supp <<'SUPP'
leak:libnvrtc
leak:libnvrtc-builtins
leak:libcuda
SUPP

if [[ "$which" == asan || "$which" == all ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPECJIT_SANITIZE=address,undefined >/dev/null
  ninja -C build-asan -j "$jobs"
  (cd build-asan &&
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/lsan.supp" \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs" -LE gpu -E '^capi/install_test$')
fi

if [[ "$which" == tsan || "$which" == all ]]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPECJIT_SANITIZE=thread >/dev/null
  ninja -C build-tsan -j "$jobs" specjit_runtime_tests specjit_process_tests specjit_test_helper
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  build-tsan/tests/specjit_runtime_tests -sf='*/runtime/engine_test.cpp' \
    -tc='concurrent requests*'
  build-tsan/tests/specjit_process_tests -sf='*/reliability/thread_stats_test.cpp'
fi
echo "sanitize.sh: $which clean"
