#!/usr/bin/env bash
# Makes apt know the source packages of the archives it already uses: adds
# deb-src beside deb, for the same archives, suites and components, when
# no source entry exists. tools/deps.sh runs it before `apt-get source
# jemalloc`; tests/unit/apt_deb_src.sh runs it on copies of each apt layout.
#
#   tools/apt-deb-src.sh [APT_DIR]        (default /etc/apt)
#
# Both layouts apt reads are handled, and any mix of them:
#  - deb822 files (sources.list.d/*.sources, Debian 12's default): a Types
#    line of "deb" gains "deb-src", in place;
#  - one-line files (sources.list, sources.list.d/*.list): a deb-src twin of
#    each deb line goes to sources.list.d/cudaev-deb-src.list.
# A deb822 file that names deb-src already is left as it is. Every file is written whole to a temporary name and
# renamed over the old one, so an interrupted run leaves no half-written
# file. Idempotent: a second run changes nothing.
set -euo pipefail
apt=${1:-/etc/apt}
[ -d "$apt" ] || { echo "apt-deb-src: no apt directory $apt" >&2; exit 1; }
parts=$apt/sources.list.d
own=$parts/cudaev-deb-src.list
changed=()
# Left by an earlier version of tools/deps.sh that died half-way (apt
# only warns about it, but it is ours).
rm -f "$own.tmp"

# Writes stdin to FILE through FILE.cudaev-tmp: the rename is atomic, and a
# failure removes the temporary file instead of leaving it.
replace() {
  local file=$1 tmp=$1.cudaev-tmp
  if ! cat >"$tmp"; then rm -f "$tmp"; return 1; fi
  [ -f "$file" ] && chmod --reference="$file" "$tmp"
  mv -f "$tmp" "$file"
}

# The one-line files that exist (a missing sources.list is normal).
one_line_files() {
  local f
  for f in "$apt/sources.list" "$parts"/*.list; do
    [ -f "$f" ] && [ "$f" != "$own" ] && printf '%s\n' "$f"
  done
  return 0
}

# deb822: only stanzas whose Types name deb and not deb-src change.
for f in "$parts"/*.sources; do
  [ -f "$f" ] || continue
  grep -Eq '^Types:.*(^|[[:space:]])deb([[:space:]]|$)' "$f" || continue
  grep -Eq '^Types:.*deb-src' "$f" && continue
  sed -E '/^Types:/{/deb-src/!{/(:|[[:space:]])deb([[:space:]]|$)/s/[[:space:]]*$/ deb-src/}}' "$f" |
    replace "$f"
  changed+=("$f")
done

# One-line entries: the twin file, unless some one-line file already has a
# deb-src line (the machine's own choice of source archives stands).
mapfile -t files < <(one_line_files)
if [ ! -f "$own" ] && [ "${#files[@]}" -gt 0 ] &&
  ! grep -Eqh '^[[:space:]]*deb-src[[:space:]]' "${files[@]}"; then
  lines=$(sed -n -E 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "${files[@]}")
  if [ -n "$lines" ]; then
    printf '%s\n' "$lines" | replace "$own"
    changed+=("$own")
  fi
fi

if [ "${#changed[@]}" -gt 0 ]; then
  echo "apt-deb-src: added deb-src entries in ${changed[*]}"
else
  echo "apt-deb-src: nothing to add"
fi
