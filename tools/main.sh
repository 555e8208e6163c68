#!/usr/bin/env bash
# The main job: set up, build, precompile what a serving image of the reference models needs
# (their MoE layers and the inverse RoPE, docs/deploy.md) into the default cache (no GPU needed),
# then show what the recompilation log says. Arguments go to precompile, e.g.
#   tools/main.sh --model deepseek-v3-tp8 --json
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
build/tools/specjit precompile "$@"
build/tools/specjit log
