#!/usr/bin/env bash
# Installs the Debian packages cudaev builds with, when any is missing
# (as root, non-interactive, idempotent). The CUDA 13.0 toolkit itself must
# already be at /usr/local/cuda (or pass -Dtoolkit=... to meson setup).
# libuv1-dev and liburing-dev are for examples/loop_libuv.c and
# examples/loop_uring.c only (each is skipped where its library is missing);
# libmicrohttpd-dev for examples/inference_server (skipped without it), wrk
# for its load test (bench/serve.sh).
set -euo pipefail
packages="libev-dev libcriterion-dev meson ninja-build pkg-config python3 binutils gcc libgl-dev libegl-dev libvdpau-dev libvulkan-dev clang-format libuv1-dev liburing-dev libmicrohttpd-dev wrk"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages:$missing (run as root, or install them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: installed$missing"
