#!/bin/sh
# tools/apt-deb-src.sh on each apt layout a fresh machine may have, each a
# copy under a temporary directory (the machine's own /etc/apt is never
# touched): deb822 only (Debian 12's default: one debian.sources, no
# sources.list), one-line sources.list only, both, and both with deb-src
# already. Checks what it wrote, that nothing half-written is left, that a
# second run changes nothing, and, where apt is installed, that apt itself
# then plans to fetch the source indexes (apt-get --print-uris update reads
# the copy and fetches nothing).
#   apt_deb_src.sh SOURCE_DIR
set -eu
script=$1/tools/apt-deb-src.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
fail() { echo "not ok - $case: $*"; failed=$((failed + 1)); }

deb822='Types: deb
URIs: http://archive.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://archive.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
one_line='deb http://archive.invalid/debian bookworm main
# deb http://archive.invalid/commented-out bookworm main
deb [arch=amd64] http://archive.invalid/debian-security bookworm-security main'

layout() { # NAME: a fresh etc/apt for the case, echoes its path
  d=$tmp/$1/etc/apt
  mkdir -p "$d/sources.list.d" "$tmp/$1/lists/partial"
  echo "$d"
}
# The source indexes apt would fetch for the copy (sorted URIs), or
# "no apt" where apt-get is missing.
apt_sources() {
  command -v apt-get >/dev/null || { echo "no apt"; return; }
  apt-get -o Dir::Etc="$1" -o Dir::State::Lists="$(dirname "$(dirname "$1")")/lists" \
    -o Dir::Etc::TrustedParts=/nonexistent --print-uris update 2>/dev/null |
    grep -o "'[^']*/source/Sources[^']*'" | sort
}
check_common() { # DIR: no temporary file left; a second run changes nothing
  left=$(find "$1" -name '*.cudaev-tmp' -o -name '*.tmp' | head -n 1)
  [ -z "$left" ] || fail "left $left behind"
  before=$(find "$1" -type f -exec md5sum {} + | sort)
  out=$("$script" "$1") || fail "second run failed: $out"
  [ "$out" = "apt-deb-src: nothing to add" ] || fail "second run said: $out"
  [ "$before" = "$(find "$1" -type f -exec md5sum {} + | sort)" ] || fail "second run changed files"
}
result() { # counts the case
  if [ "$failed_before" = "$failed" ]; then echo "ok - $case"; passed=$((passed + 1)); fi
}

case="deb822 only (no sources.list, no *.list, no deb-src)"; failed_before=$failed
d=$(layout deb822)
printf '%s\n' "$deb822" >"$d/sources.list.d/debian.sources"
out=$("$script" "$d" 2>&1) || fail "exit $?: $out"
[ "$(grep -c '^Types: deb deb-src$' "$d/sources.list.d/debian.sources")" = 2 ] ||
  fail "Types lines: $(grep '^Types' "$d/sources.list.d/debian.sources" | tr '\n' ';')"
[ ! -e "$d/sources.list.d/cudaev-deb-src.list" ] || fail "wrote a one-line file for a deb822 layout"
[ "$(sed '/^Types:/d' "$d/sources.list.d/debian.sources")" = "$(printf '%s\n' "$deb822" | sed '/^Types:/d')" ] ||
  fail "changed more than the Types lines"
check_common "$d"
src=$(apt_sources "$d")
[ "$src" = "no apt" ] || [ "$(echo "$src" | grep -c .)" = 3 ] || fail "apt plans these source indexes: $src"
result

case="one-line sources.list only"; failed_before=$failed
d=$(layout oneline)
printf '%s\n' "$one_line" >"$d/sources.list"
out=$("$script" "$d" 2>&1) || fail "exit $?: $out"
want='deb-src http://archive.invalid/debian bookworm main
deb-src [arch=amd64] http://archive.invalid/debian-security bookworm-security main'
[ "$(cat "$d/sources.list.d/cudaev-deb-src.list" 2>/dev/null)" = "$want" ] ||
  fail "cudaev-deb-src.list: $(cat "$d/sources.list.d/cudaev-deb-src.list" 2>&1)"
[ "$(cat "$d/sources.list")" = "$one_line" ] || fail "changed sources.list"
check_common "$d"
src=$(apt_sources "$d")
[ "$src" = "no apt" ] || [ "$(echo "$src" | grep -c .)" = 2 ] || fail "apt plans these source indexes: $src"
result

case="deb822 and one-line files together"; failed_before=$failed
d=$(layout both)
printf '%s\n' "$deb822" >"$d/sources.list.d/debian.sources"
printf '%s\n' 'deb http://archive.invalid/debian bookworm-backports main' >"$d/sources.list.d/extra.list"
out=$("$script" "$d" 2>&1) || fail "exit $?: $out"
grep -q '^Types: deb deb-src$' "$d/sources.list.d/debian.sources" || fail "deb822 file unchanged"
[ "$(cat "$d/sources.list.d/cudaev-deb-src.list" 2>/dev/null)" = \
  'deb-src http://archive.invalid/debian bookworm-backports main' ] || fail "one-line twin missing"
check_common "$d"
src=$(apt_sources "$d")
[ "$src" = "no apt" ] || [ "$(echo "$src" | grep -c .)" = 4 ] || fail "apt plans these source indexes: $src"
result

case="deb-src already there (both layouts)"; failed_before=$failed
d=$(layout already)
printf '%s\n' "$deb822" | sed 's/^Types: deb$/Types: deb deb-src/' >"$d/sources.list.d/debian.sources"
printf '%s\n%s\n' "$one_line" 'deb-src http://archive.invalid/debian bookworm main' >"$d/sources.list"
before=$(find "$d" -type f -exec md5sum {} + | sort)
out=$("$script" "$d" 2>&1) || fail "exit $?: $out"
[ "$out" = "apt-deb-src: nothing to add" ] || fail "said: $out"
[ "$before" = "$(find "$d" -type f -exec md5sum {} + | sort)" ] || fail "changed files"
result

case="an empty apt directory"; failed_before=$failed
d=$(layout empty)
out=$("$script" "$d" 2>&1) || fail "exit $?: $out"
[ "$out" = "apt-deb-src: nothing to add" ] || fail "said: $out"
result

case="no apt directory: a clear error"; failed_before=$failed
rc=0
out=$("$script" "$tmp/none" 2>&1) || rc=$?
[ "$rc" = 1 ] && echo "$out" | grep -q "no apt directory" || fail "exit $rc: $out"
result

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
