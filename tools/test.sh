#!/usr/bin/env bash
# Set up, build, and run every test (GPU tests skip visibly without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
