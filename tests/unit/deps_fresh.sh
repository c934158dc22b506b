#!/bin/sh
# tools/deps.sh as a fresh Debian 12 machine meets it: apt configured by
# deb822 files only (no sources.list, no *.list), no deb-src entry, empty
# package lists and no cached jemalloc source. Runs in a private mount
# namespace over copies, so the machine's own /etc/apt, package lists and
# cache are never touched; it fetches the package lists (as the set-up
# itself does). Checks that deps.sh succeeds, says what it did, and leaves
# apt knowing jemalloc's source package with nothing half-written.
#   deps_fresh.sh SOURCE_DIR
set -u
src=$(cd "$1" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a private mount namespace)"; exit 77; }
command -v apt-get >/dev/null || { echo "SKIP: no apt on this machine"; exit 77; }
unshare -m true 2>/dev/null || { echo "SKIP: no private mount namespace here (unshare -m)"; exit 77; }
ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1 ||
  { echo "SKIP: this machine's apt has no deb822 file to start a fresh layout from"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/empty"
cp -a /etc/apt "$tmp/apt"
rm -f "$tmp/apt/sources.list" "$tmp/apt/sources.list.d/"*.list
sed -i -E '/^Types:/s/[[:space:]]+deb-src//' "$tmp/apt/sources.list.d/"*.sources
hide=""
[ -d "$src/subprojects/jemalloc-src" ] && hide="mount --bind $tmp/empty $src/subprojects/jemalloc-src"
rc=0
unshare -m sh -c "mount --bind $tmp/apt /etc/apt && mount --bind $tmp/lists /var/lib/apt/lists &&
  mount --bind $tmp/cache /var/cache/apt && ${hide:-true} &&
  env -u CUDAEV_JEMALLOC_SRC bash $src/tools/deps.sh" >"$tmp/log" 2>&1 || rc=$?
sed 's/^/  | /' "$tmp/log"
fail=0
[ "$rc" = 0 ] || { echo "FAIL: tools/deps.sh exited $rc on a fresh layout"; fail=1; }
grep -q "apt knows the source package jemalloc" "$tmp/log" || { echo "FAIL: no line saying apt knows jemalloc's source"; fail=1; }
for f in "$tmp/apt/sources.list.d/"*.sources; do
  grep -Eq '^Types:.*deb-src' "$f" || { echo "FAIL: no deb-src in $(basename "$f")"; fail=1; }
done
left=$(find "$tmp/apt" -name '*.tmp' -o -name '*.cudaev-tmp' | head -n 1)
[ -z "$left" ] || { echo "FAIL: left ${left#"$tmp/"} behind"; fail=1; }
[ "$fail" = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$fail"
