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
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# dpkg-dev, bzip2, xz-utils: apt-get source unpacks with dpkg-source;
# make: jemalloc's build. libuv1-dev and liburing-dev are for
# examples/loop_libuv.c and examples/loop_uring.c only (each is skipped where
# its library is missing); libmicrohttpd-dev for examples/inference_server
# (skipped without it), wrk for its load test (bench/serve.sh).
packages="libev-dev libcriterion-dev meson ninja-build pkg-config python3 binutils gcc make
  dpkg-dev bzip2 xz-utils libgl-dev libegl-dev libvdpau-dev libvulkan-dev clang-format
  libuv1-dev liburing-dev libmicrohttpd-dev wrk"
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

# deb-src beside deb: deb822 files get deb-src in their Types lines; one-line
# files get a deb-src twin of each deb line in a file of our own. Both are
# no-ops once done.
add_deb_src() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -Eq '^Types:.*\<deb\>' "$f" || continue
    sed -i -E '/^Types:/{/deb-src/!{/\<deb\>/s/$/ deb-src/}}' "$f"
  done
  local own=/etc/apt/sources.list.d/cudaev-deb-src.list
  if [ ! -f "$own" ] && ! cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    grep -Eq '^[[:space:]]*deb-src[[:space:]]'; then
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -n -E 's/^[[:space:]]*deb[[:space:]]/deb-src /p' >"$own.tmp"
    if [ -s "$own.tmp" ]; then mv "$own.tmp" "$own"; else rm -f "$own.tmp"; fi
  fi
}

export DEBIAN_FRONTEND=noninteractive
$need_src && add_deb_src
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
[ -z "$missing" ] || apt-get install -y -qq --no-install-recommends $missing >/dev/null
if $need_src && ! apt-cache showsrc jemalloc 2>/dev/null | grep -q '^Version: 5\.3\.0'; then
  echo "deps: apt still has no source package jemalloc 5.3.0 (Debian bookworm has 5.3.0-1);" \
    "set CUDAEV_JEMALLOC_SRC to an unpacked jemalloc 5.3.0" >&2
  exit 1
fi
msg="deps: installed${missing:- nothing}"
$need_src && msg="$msg; apt knows the source package jemalloc"
echo "$msg"
