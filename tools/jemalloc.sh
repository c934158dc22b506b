#!/usr/bin/env bash
# Builds the private jemalloc that serves pinned host memory (src/hostpool.c):
# a static PIC archive whose every symbol is prefixed and hidden, linked
# whole into libcudart.so.13. Run by Meson (root meson.build); by hand:
#
#   tools/jemalloc.sh CC WORK_DIR OUT_ARCHIVE OUT_HEADER [COMPAT_HEADER]
#
# COMPAT_HEADER, when given, is included in every jemalloc source file: the
# library's glibc_compat.h (tools/gen_glibc_compat.py), so that jemalloc's
# references to glibc take the same old symbol versions as the rest.
#
# The source is Debian's source package of jemalloc 5.3.0, fetched once with
# `apt-get source` into subprojects/jemalloc-src/ (ignored by git) and shared
# by every build directory of the checkout. CUDAEV_JEMALLOC_SRC names an
# unpacked 5.3.0 tree to use instead (a machine without deb-src entries).
# tools/deps.sh adds the deb-src entries and dpkg-dev that apt-get source
# needs. The build uses jemalloc's own flags, never Meson's (no sanitizer
# instrumentation: the pool's callers are instrumented, the allocator's
# internals need not be).
set -euo pipefail
cc=$1 work=$2 out_lib=$3 out_h=$4 compat=${5:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
want=5.3.0

fetch() { # unpacks the source package into $cache (once per checkout)
  local cache=$1 parent tmp
  parent=$(dirname "$cache")
  mkdir -p "$parent"
  exec 9>"$parent/.lock"
  flock 9
  if [ -f "$cache/VERSION" ]; then return 0; fi
  tmp=$(mktemp -d "$parent/fetch.XXXXXX")
  echo "jemalloc: apt-get source jemalloc (once, into $cache)"
  if ! (cd "$tmp" && apt-get source -qq jemalloc >apt.log 2>&1); then
    cat "$tmp/apt.log" >&2
    echo "jemalloc: apt-get source failed: run tools/deps.sh as root (it adds the deb-src" \
      "entries and dpkg-dev), or set CUDAEV_JEMALLOC_SRC to an unpacked jemalloc $want" >&2
    rm -rf "$tmp"
    exit 1
  fi
  local dir
  dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'jemalloc-*' | head -n 1)
  [ -n "$dir" ] && [ -f "$dir/VERSION" ] || { echo "jemalloc: no source tree unpacked" >&2; exit 1; }
  mv "$dir" "$cache"
  rm -rf "$tmp"
}

src=${CUDAEV_JEMALLOC_SRC:-$root/subprojects/jemalloc-src/jemalloc}
[ -n "${CUDAEV_JEMALLOC_SRC:-}" ] || fetch "$src"
src=$(cd "$src" && pwd)
case $(cat "$src/VERSION") in
"$want"-*) ;;
*) echo "jemalloc: $src is $(cat "$src/VERSION"), the pool is written against $want" >&2; exit 1 ;;
esac

# Why each option:
#  prefix cudaev_je_, private namespace cudaev_je_int_, --without-export:
#      every symbol is renamed and hidden, so the application's malloc (glibc,
#      or a jemalloc of its own) is never replaced or confused with ours;
#  --disable-initial-exec-tls: jemalloc's thread state uses dynamic TLS
#      (descriptors, -mtls-dialect=gnu2 like the rest of the library), so the
#      library can still be dlopen()ed late (ctypes) without a STATIC_TLS flag;
#  --disable-cache-oblivious: a large allocation is exactly its size class,
#      page-aligned at the start of its extent (no random offset page), so an
#      extent is one allocation and one driver chunk;
#  --disable-stats, --disable-fill, --disable-prof: counters, junk filling and
#      profiling the pool does not use, off its hot path;
#  --disable-libdl: jemalloc needs dlsym only for lazy locking and background
#      threads, neither of which the pool uses;
#  --disable-cxx, --disable-doc: nothing to build but the C archive.
opts=(--with-jemalloc-prefix=cudaev_je_ --with-private-namespace=cudaev_je_int_
  --without-export --disable-initial-exec-tls --disable-cache-oblivious
  --disable-stats --disable-fill --disable-prof --disable-libdl
  --disable-cxx --disable-doc --disable-shared --enable-static)
# jemalloc adds -g3 -O3 of its own; these come after and win.
cflags="-O2 -g1 -mtls-dialect=gnu2"
if [ -n "$compat" ]; then cflags="$cflags -include $compat"; fi
stamp="$want $cc $cflags ${opts[*]} maps_coalesce=0"

mkdir -p "$work"
if [ ! -f "$work/lib/libjemalloc_pic.a" ] || [ "$(cat "$work/stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "${work:?}"/*
  (cd "$work" && CC=$cc CFLAGS=$cflags "$src/configure" "${opts[@]}" >configure.log 2>&1) ||
    { tail -30 "$work/configure.log" >&2; exit 1; }
  # The pool's extent hooks refuse split and merge, so that every extent
  # jemalloc holds is exactly one chunk from cuMemHostAlloc. jemalloc
  # supports such hooks only where mappings do not coalesce (its Windows
  # mode, with retain off): it then reuses cached extents by exact size
  # only, instead of splitting a larger one and abandoning it when the
  # split fails. The configure script decides this by platform and takes
  # no option for it, so the generated header is edited here.
  defs=$work/include/jemalloc/internal/jemalloc_internal_defs.h
  sed -i 's|^#define JEMALLOC_MAPS_COALESCE.*|/* #undef JEMALLOC_MAPS_COALESCE: cudaev (tools/jemalloc.sh) */|' "$defs"
  if grep -q '^#define JEMALLOC_MAPS_COALESCE' "$defs"; then
    echo "jemalloc: could not turn JEMALLOC_MAPS_COALESCE off" >&2
    exit 1
  fi
  make -C "$work" -j"$(nproc)" lib/libjemalloc_pic.a >"$work/make.log" 2>&1 ||
    { tail -30 "$work/make.log" >&2; exit 1; }
  echo "$stamp" >"$work/stamp"
fi
cp "$work/lib/libjemalloc_pic.a" "$out_lib"
cp "$work/include/jemalloc/jemalloc.h" "$out_h"
