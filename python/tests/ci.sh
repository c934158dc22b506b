#!/usr/bin/env bash
# The Python package's CI test (meson test `python`, suite unit): builds the
# wheel from the tree against BUILD_DIR's libcudaev.so.1 (tools/py-wheel.sh),
# unpacks it into a temporary folder and runs the pytest suite on it with
# Debian's Python, on asyncio's loop and on uvloop; on trio and on anyio's
# two backends too where python3-trio / python3-anyio are installed (those
# tests skip, saying why, where they are not). No network.
#
#   python/tests/ci.sh BUILD_DIR [PYTEST_ARGS...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
shift
py=/usr/bin/python3
for m in pytest pytest_asyncio uvloop; do
  $py -c "import $m" 2>/dev/null ||
    { echo "python: $py cannot import $m (tools/deps.sh installs its Debian package)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
whl=$("$root/tools/py-wheel.sh" "$build" "$tmp/dist")
echo "# wheel: $(basename "$whl")"
$py -m zipfile -e "$whl" "$tmp/site"
cp -r "$here" "$tmp/tests"
rm -rf "$tmp/tests/gpu"
cd "$tmp/tests"
CUDAEV_EXPECT_FROM="$tmp/site" PYTHONPATH="$tmp/site" \
  $py -m pytest -p no:cacheprovider -q -rs "$@" .
