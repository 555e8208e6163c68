#!/usr/bin/env bash
# Set up, build, and run every test, C++ and Python (GPU tests skip visibly without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
cd ..
# The Python package, installed into a fresh virtual environment against this build.
tools/python_test.sh build
