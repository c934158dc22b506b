#!/bin/sh
# `meson install` puts libcudart.so.13 in its own folder under libdir with a
# pkg-config file, so that `pkg-config --libs cudaev` links ours.
#   install.sh BUILD_DIR
set -eu
build=$1
dest="$build/install-test"
rm -rf "$dest"
DESTDIR="$dest" meson install -C "$build" --no-rebuild --quiet >/dev/null
pc=$(find "$dest" -name cudaev.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no cudaev.pc installed"; exit 1; }
case "$pc" in */pkgconfig/cudaev.pc) ;; *) echo "FAIL: cudaev.pc not in a pkgconfig dir: $pc"; exit 1 ;; esac
libs=$(PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config --libs cudaev)
echo "pkg-config --libs cudaev: $libs"
libdir=$(echo "$libs" | sed -n 's/.*-L\([^ ]*\).*/\1/p')
case "$libdir" in */cudaev) ;; *) echo "FAIL: -L is not a folder of its own: $libdir"; exit 1 ;; esac
echo "$libs" | grep -q -- "-lcudart" || { echo "FAIL: no -lcudart"; exit 1; }
lib="$libdir/libcudart.so.13"
[ -e "$lib" ] || { echo "FAIL: $lib not installed"; exit 1; }
readelf -d "$lib" | grep -q 'SONAME.*\[libcudart\.so\.13\]' || { echo "FAIL: SONAME of $lib"; exit 1; }
find "$dest" -name cudaev.h | grep -q . || { echo "FAIL: cudaev.h not installed"; exit 1; }
rm -rf "$dest"
echo "ok: installed into its own folder, pkg-config links it"
