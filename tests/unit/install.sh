#!/bin/sh
# `meson install` puts libcudart.so.13 in its own folder under libdir with a
# pkg-config file, cudaev.h and the libuv adapter cudaev_uv.h, and
# cudaev-info. A program built with nothing but
# `pkg-config --cflags --libs cudaev` must compile under -pedantic -Werror
# (the toolkit's headers come in through -isystem) and must load OUR
# libcudart.so.13, also with the toolkit's lib64 on LD_LIBRARY_PATH (the .pc
# gives it a DT_RPATH, which the loader searches before LD_LIBRARY_PATH).
#   install.sh BUILD_DIR SOURCE_DIR TOOLKIT CC SANITIZE
# The install goes to a DESTDIR; pkg-config's prefix is moved there with
# --define-variable, so the rpath names the files actually installed.
set -eu
build=$1 src=$2 toolkit=$3 cc=$4 sanitize=$5
dest="$build/install-test"
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dest"
DESTDIR="$dest" meson install -C "$build" --no-rebuild --quiet >/dev/null
pc=$(find "$dest" -name cudaev.pc | head -n 1)
[ -n "$pc" ] || fail "no cudaev.pc installed"
case "$pc" in */pkgconfig/cudaev.pc) ;; *) fail "cudaev.pc not in a pkgconfig dir: $pc" ;; esac
prefix=$(sed -n 's/^prefix=//p' "$pc")
pkgconf() { PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$dest$prefix" "$@" cudaev; }
cflags=$(pkgconf --cflags) libs=$(pkgconf --libs)
echo "pkg-config --cflags cudaev: $cflags"
echo "pkg-config --libs cudaev: $libs"

libdir=$(echo "$libs" | sed -n 's/.*-L\([^ ]*\).*/\1/p')
case "$libdir" in */cudaev) ;; *) fail "-L is not a folder of its own: $libdir" ;; esac
echo "$libs" | grep -q -- "-lcudart" || fail "no -lcudart"
echo "$libs" | grep -q -- "-Wl,--disable-new-dtags,-rpath,$libdir\( \|$\)" || fail "no DT_RPATH to $libdir"
echo "$cflags" | grep -q -- "-isystem $toolkit/include" || fail "the toolkit's headers are not -isystem"
lib="$libdir/libcudart.so.13"
[ -e "$lib" ] || fail "$lib not installed"
readelf -d "$lib" | grep -q 'SONAME.*\[libcudart\.so\.13\]' || fail "SONAME of $lib"
header=$(find "$dest" -name cudaev.h | head -n 1)
[ -n "$header" ] || fail "cudaev.h not installed"
# The libuv adapter lands beside cudaev.h, in the folder pkg-config's -I names.
[ -f "$(dirname "$header")/cudaev_uv.h" ] || fail "cudaev_uv.h not installed beside $header"
echo "$cflags" | grep -q -- "-I$(dirname "$header")\( \|$\)" || fail "-I is not cudaev.h's folder"

# A user's program, built from pkg-config alone. -std=c99 -pedantic is what
# proves -isystem: the toolkit's headers use C11's anonymous unions, which
# -pedantic reports in C99 unless they are system headers. Under a sanitizer
# the installed library needs its runtime first in the process, so the
# program is built with it too.
san=""
[ "$sanitize" = none ] || san="-fsanitize=$sanitize"
probe="$dest/probe"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only "$src/tests/unit/install_probe.c" \
  $cflags || fail "the probe does not build with -std=c11 -pedantic -Werror from pkg-config alone"
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror $san -o "$probe" "$src/tests/unit/install_probe.c" \
  $cflags $libs -ldl || fail "the probe does not build with -std=c99 -pedantic -Werror from pkg-config alone"
readelf -d "$probe" | grep -q "(RPATH).*$libdir" || fail "the probe has no DT_RPATH to $libdir"
for llp in "" "$toolkit/lib64"; do
  out=$(env -u LD_LIBRARY_PATH ${llp:+LD_LIBRARY_PATH=$llp} "$probe" 2>&1) ||
    fail "the probe (LD_LIBRARY_PATH=${llp:-unset}) failed: $out"
  echo "$out" | grep -qx "libcudart.so.13: $lib" ||
    fail "LD_LIBRARY_PATH=${llp:-unset}: not ours: $out"
  echo "with LD_LIBRARY_PATH=${llp:-unset}: $(echo "$out" | head -n 1)"
done

# The trap the rpath avoids, shown where this machine sets it: without the
# rpath, the toolkit's library on LD_LIBRARY_PATH is loaded and lacks our
# version node.
if [ -e "$toolkit/lib64/libcudart.so.13" ]; then
  # shellcheck disable=SC2086
  "$cc" -std=c11 $san -o "$probe-norpath" "$src/tests/unit/install_probe.c" $cflags \
    -L"$libdir" -lcudart -ldl
  if out=$(LD_LIBRARY_PATH="$toolkit/lib64" "$probe-norpath" 2>&1); then
    fail "control: without the rpath the toolkit's library should have won: $out"
  fi
  echo "control, no rpath, toolkit on LD_LIBRARY_PATH: $(echo "$out" | head -n 1)"
fi

# A libuv program built from pkg-config alone (cudaev and libuv) includes the
# installed <cudaev_uv.h> and drives a foreign loop with it; where libuv's
# development files are missing, only the header's presence is checked.
# gnu11: uv.h uses POSIX types (pthread_rwlock_t) that strict -std=c11 hides.
if pkg-config --exists libuv; then
  uvflags=$(pkg-config --cflags --libs libuv)
  # shellcheck disable=SC2086
  "$cc" -std=gnu11 -Wall -Wextra -pedantic -Werror $san -o "$probe-uv" \
    "$src/tests/unit/install_uv_probe.c" $cflags $libs $uvflags ||
    fail "a libuv program does not build with <cudaev_uv.h> from pkg-config alone"
  out=$(env -u LD_LIBRARY_PATH "$probe-uv" 2>&1) || fail "the libuv probe failed: $out"
  echo "libuv program with the installed cudaev_uv.h: $out"
else
  echo "libuv program with the installed cudaev_uv.h: not built (no libuv.pc)"
fi

# The standalone async library: cudaev-async.pc gives a program that needs
# libcudaev.so.1 and no libcudart at all (its runtime is the process's own).
apc=$(find "$dest" -name cudaev-async.pc | head -n 1)
[ -n "$apc" ] || fail "no cudaev-async.pc installed"
aflags=$(PKG_CONFIG_PATH=$(dirname "$apc") pkg-config --define-variable=prefix="$dest$prefix" \
  --cflags --libs cudaev-async)
echo "pkg-config --cflags --libs cudaev-async: $aflags"
alibdir=$(echo "$aflags" | sed -n 's/.*-L\([^ ]*\).*/\1/p')
readelf -d "$alibdir/libcudaev.so.1" | grep -q 'SONAME.*\[libcudaev\.so\.1\]' || fail "SONAME of libcudaev.so.1"
cat >"$probe-async.c" <<'C'
#include <cudaev.h>
#include <stdio.h>
int main(void) {
  cudaev_loop_t *loop;
  cudaev_future_t *f;
  if (cudaev_loop_new_foreign(&loop) != cudaSuccess || cudaev_promise_new(loop, &f) != cudaSuccess)
    return 1;
  cudaev_promise_set(f, cudaErrorNotReady);
  cudaev_loop_process(loop);
  int ok = cudaev_future_ready(f) && cudaev_future_result(f) == cudaErrorNotReady;
  printf("promise through libcudaev.so.1: %s\n", ok ? "ok" : "wrong");
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  return ok ? 0 : 1;
}
C
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -pedantic -Werror $san -o "$probe-async" "$probe-async.c" $aflags ||
  fail "a program does not build from cudaev-async's pkg-config alone"
needed=$(readelf -d "$probe-async" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in *libcudaev.so.1*) ;; *) fail "the async program does not need libcudaev.so.1: $needed" ;; esac
case "$needed" in *libcudart*) fail "the async program needs a libcudart: $needed" ;; esac
out=$(LD_LIBRARY_PATH="$alibdir" "$probe-async" 2>&1) || fail "the async program failed: $out"
echo "$out"

# cudaev-info is installed with a relative rpath, so it runs from DESTDIR.
info=$(find "$dest" -path '*/bin/cudaev-info' | head -n 1)
[ -n "$info" ] || fail "cudaev-info not installed"
rc=0
out=$(env -u LD_LIBRARY_PATH "$info") || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 2 ] || fail "installed cudaev-info exit $rc: $out"
echo "$out" | grep -qx "libcudart.so.13: $(readlink -f "$lib")" ||
  fail "installed cudaev-info did not load the installed library: $out"
rm -rf "$dest"
echo "ok: installed into its own folder; a pkg-config-only build loads ours"
