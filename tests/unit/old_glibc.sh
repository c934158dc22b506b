#!/bin/sh
# libcudart.so.13 loads and runs on glibc 2.31 (Debian 11), as NVIDIA's
# does: a constructor in a preloaded helper calls into it from a program
# of that glibc, run by that glibc's loader with every symbol bound at once.
#   old_glibc.sh BUILD_DIR LIBCUDART [NVIDIA_LIBCUDART]
# Fetches Debian 11's libc6 and libc-bin into BUILD_DIR/old-glibc once (the
# Debian archive); exits 77 (skipped) when they cannot be had.
set -u
build=$1 lib=$2 nvidia=${3:-}
dir="$build/old-glibc"
root="$dir/root"
if [ ! -x "$root/usr/bin/getconf" ]; then
  rm -rf "$dir"
  mkdir -p "$dir/lists/partial" "$dir/debs" || exit 77
  # The machine's own Debian archive (its first deb entry, deb822 or
  # one-line), at the bullseye suite.
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}')
  [ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}')
  [ -n "$mirror" ] || { echo "SKIP: no Debian archive in this machine's apt sources"; exit 77; }
  echo "deb $mirror bullseye main" >"$dir/sources.list"
  o="-oDir::Etc::SourceList=$dir/sources.list -oDir::Etc::SourceParts=/dev/null"
  o="$o -oDir::State::Lists=$dir/lists -oDir::State::status=/dev/null -oDebug::NoLocking=1"
  # shellcheck disable=SC2086
  if ! apt-get $o update -qq >/dev/null 2>&1; then
    echo "SKIP: Debian 11's package lists could not be fetched"; exit 77
  fi
  for p in libc6 libc-bin; do
    # shellcheck disable=SC2086
    v=$(apt-cache $o madison "$p" 2>/dev/null | awk 'NR==1{print $3}')
    # shellcheck disable=SC2086
    (cd "$dir/debs" && apt-get $o download "$p=$v" >/dev/null 2>&1) || {
      echo "SKIP: Debian 11's $p could not be fetched"; exit 77; }
  done
  for d in "$dir"/debs/*.deb; do dpkg -x "$d" "$root" || exit 77; done
fi
L="$root/lib/x86_64-linux-gnu"
[ -x "$L/ld-linux-x86-64.so.2" ] || { echo "SKIP: not an x86-64 machine"; exit 77; }
cat >"$dir/probe.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int cudaGetDeviceCount(int *);
const char *cudaGetErrorName(int);
int cudaev_loop_new_thread(void **);
void cudaev_loop_destroy(void *);
__attribute__((constructor)) static void probe(void) {
  int n = -1;
  int r = cudaGetDeviceCount(&n);
#ifdef PROBE_LOOP
  void *loop = NULL;
  int rl = cudaev_loop_new_thread(&loop);
  if (loop) cudaev_loop_destroy(loop);
#else
  int rl = 0;
#endif
  printf("probe: cudaGetDeviceCount -> %s, loop -> %d\n", cudaGetErrorName(r), rl);
}
C
# The helpers reference only symbol versions every glibc since 2.2.5 has;
# the NVIDIA one calls no cudaev_ function.
cc -shared -fPIC -DPROBE_LOOP -o "$dir/probe.so" "$dir/probe.c" "$lib" || exit 1
cc -shared -fPIC -o "$dir/probe_rt.so" "$dir/probe.c" "$lib" || exit 1
run() { # LIB PROBE: run getconf of glibc 2.31 with LIB and PROBE preloaded
  LD_BIND_NOW=1 "$L/ld-linux-x86-64.so.2" --library-path "$L" \
    --preload "$1 $2" "$root/usr/bin/getconf" PAGESIZE 2>&1
}
fail=0
if [ -n "$nvidia" ] && [ -e "$nvidia" ]; then
  echo "NVIDIA's: $(run "$nvidia" "$dir/probe_rt.so" | tr '\n' ' ')"
fi
out=$(run "$lib" "$dir/probe.so"); echo "ours:     $(echo "$out" | tr '\n' ' ')"
echo "$out" | grep -q "^probe: cudaGetDeviceCount -> cuda.*, loop -> 0$" || fail=1
echo "$out" | grep -q "^4096$" || fail=1
[ $fail = 0 ] && echo "ok: loads and runs on glibc 2.31" || echo "FAIL: does not run on glibc 2.31"
exit $fail
