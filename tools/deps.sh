#!/usr/bin/env bash
# Installs the Debian packages cudaev builds with, when any is missing
# (as root, non-interactive, idempotent). The CUDA 13.0 toolkit itself must
# already be at /usr/local/cuda (or pass -Dtoolkit=... to meson setup).
#
# The private jemalloc (tools/jemalloc.sh) is built from Debian's source
# package, fetched with `apt-get source`: until its unpacked tree is cached
# in subprojects/jemalloc-src/, this also makes sure apt knows the source
# package, adding deb-src entries beside the existing deb ones when there
# are none (the same archives, suites and components).
set -euo pipefail
# A failing step says which, whatever it printed (set -e alone ends in silence).
trap 'echo "deps: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# dpkg-dev, bzip2, xz-utils: apt-get source unpacks with dpkg-source;
# make: jemalloc's build. libuv1-dev and liburing-dev are for
# examples/loop_libuv.c and examples/loop_uring.c only (each is skipped where
# its library is missing); libhttp-parser-dev (the service's HTTP parser,
# linked statically) and libmicrohttpd-dev (its blocking twin) for
# examples/inference_server (skipped without them), wrk for its load test (bench/serve.sh); nginx and
# curl for deploy/ (nginx in front of two service processes; its test).
# python3-*: the Python package (python/): its build (setuptools, wheel, pip,
# the headers) and its tests (pytest, pytest-asyncio, uvloop; trio and anyio
# for its trio path, whose tests skip without them); python3-aiohttp and
# -numpy for examples/python_service; g++ and libasio-dev for include/cudaev.hpp's
# tests and examples/loop_asio.cpp (skipped without them).
packages="libev-dev libcriterion-dev meson ninja-build pkg-config python3 binutils gcc make
  dpkg-dev bzip2 xz-utils libgl-dev libegl-dev libvdpau-dev libvulkan-dev clang-format
  libuv1-dev liburing-dev libhttp-parser-dev libmicrohttpd-dev wrk nginx curl g++ libasio-dev
  python3-dev python3-pip python3-setuptools python3-wheel python3-pytest
  python3-pytest-asyncio python3-uvloop python3-trio python3-anyio python3-aiohttp
  python3-numpy"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

# apt must know jemalloc's source package unless its tree is already here.
need_src=false
if [ -z "${CUDAEV_JEMALLOC_SRC:-}" ] && [ ! -f subprojects/jemalloc-src/jemalloc/VERSION ] &&
  ! apt-cache showsrc jemalloc 2>/dev/null | grep -q '^Version: 5\.3\.0'; then
  need_src=true
fi

[ -z "$missing" ] && ! $need_src && exit 0
if [ "$(id -u)" != 0 ]; then
  [ -n "$missing" ] && echo "deps: missing Debian packages:$missing (run as root, or install them)" >&2
  $need_src && echo "deps: apt has no source package jemalloc 5.3.0: run as root to add deb-src" \
    "entries, or set CUDAEV_JEMALLOC_SRC to an unpacked jemalloc 5.3.0" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$need_src && tools/apt-deb-src.sh
apt-get update -qq >/dev/null
# Debian's nginx starts a system nginx on port 80 when installed; deploy/
# runs its own, so the start is refused for the install (policy-rc.d, as in
# container images), unless the machine already has a policy.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
# shellcheck disable=SC2086
[ -z "$missing" ] || apt-get install -y -qq --no-install-recommends $missing >/dev/null
[ -z "$policy" ] || rm -f "$policy"
if $need_src && ! apt-cache showsrc jemalloc 2>/dev/null | grep -q '^Version: 5\.3\.0'; then
  echo "deps: apt still has no source package jemalloc 5.3.0 (Debian bookworm has 5.3.0-1);" \
    "set CUDAEV_JEMALLOC_SRC to an unpacked jemalloc 5.3.0" >&2
  exit 1
fi
msg="deps: installed${missing:- nothing}"
$need_src && msg="$msg; apt knows the source package jemalloc"
echo "$msg"
