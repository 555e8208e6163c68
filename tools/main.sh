#!/usr/bin/env bash
# The main job on the embedded default: set up, build, precompile the built-in kernels' default
# variants into the default cache (no GPU needed), then show what the recompilation log says.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
build/tools/specjit precompile "$@"
build/tools/specjit log
