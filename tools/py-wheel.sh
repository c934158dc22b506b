#!/usr/bin/env bash
# Builds the Python package's wheel (cudaev-*-cp311-abi3-linux_x86_64.whl,
# one file for CPython 3.11 and later) from this tree, offline, with
# Debian's Python and build tools, against BUILD_DIR's libcudaev.so.1
# (which the wheel carries). The tree is copied first, so nothing is
# written into python/. Prints the wheel's path.
#
#   tools/py-wheel.sh [BUILD_DIR [OUT_DIR]]     (default: build, BUILD_DIR/py-dist)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/py-dist}
py=/usr/bin/python3 # Debian's, where python3-setuptools and python3-wheel live
[ -f "$build/libcudaev.so.1" ] || { echo "py-wheel: no libcudaev.so.1 in $build (ninja -C $build)" >&2; exit 1; }
for m in setuptools wheel pip; do
  $py -c "import $m" 2>/dev/null ||
    { echo "py-wheel: $py cannot import $m (tools/deps.sh installs python3-$m)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$out"
cp -r "$root/python" "$tmp/src/python"
rm -rf "$tmp/src/python/build" "$tmp/src/python/build-meson" "$tmp/src/python"/*.egg-info
ln -s "$root/include" "$tmp/src/include"
# --no-build-isolation: use the installed setuptools/wheel instead of
# fetching them; --no-index: never reach for the network.
rm -f "$out"/cudaev-*.whl
CUDAEV_BUILD_DIR=$build PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
  $py -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$out" "$tmp/src/python" >&2
ls "$out"/cudaev-*.whl
