#!/usr/bin/env bash
# The Python package's tests: installs the C++ build into BUILD/prefix, makes a fresh virtual
# environment, pip-installs python/ against that prefix (no second C++ build), runs pytest.
# Tests that need torch or a GPU skip visibly (-rs: "SKIPPED ... [torch]" / "[gpu]").
# Usage: tools/python_test.sh [BUILD_DIR] [pytest args...]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
prefix=$PWD/$build/prefix
venv=$PWD/$build/python-venv
cmake --install "$build" --prefix "$prefix" >/dev/null
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check pytest numpy ml_dtypes nanobind \
  scikit-build-core
SPECJIT_PREFIX=$prefix "$venv/bin/pip" install -q --disable-pip-version-check \
  --no-build-isolation --no-deps ./python
# Outside the tree, so the installed package (not python/specjit) is what is imported.
cd "$build"
set +e
"$venv/bin/python" -m pytest "$OLDPWD/tests/python" -rs -q -p no:cacheprovider "$@"
rc=$?
set -e
if ((rc == 5)); then
  echo "python_test: pytest collected no tests" >&2
  exit 1
fi
exit $rc
