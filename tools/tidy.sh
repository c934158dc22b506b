#!/usr/bin/env bash
# Runs clang-tidy (the committed .clang-tidy) over the library's sources with
# a build's compile_commands.json and ends with a count of findings per
# check. Report only: it exits 0 whatever it finds (not part of CI).
#
#   tools/tidy.sh [BUILD_DIR] [FILE...]     (default: build, src/ and loop/)
#   TIDY_JOBS=N                            parallel clang-tidy processes (default: nproc)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
shift || true
[ -f "$build/compile_commands.json" ] ||
  { echo "tidy: no $build/compile_commands.json (meson setup $build && ninja -C $build first)"; exit 1; }
[ $# -gt 0 ] || set -- src/*.c src/driver/*.c loop/*.c
# clang does not know GCC's -mtls-dialect=gnu2 and would report every file
# as an error; the generated driver table must exist (ninja builds it).
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
sed -e 's/ -mtls-dialect=gnu2//g' -e 's/ -fdiagnostics-color=always//g' \
  "$build/compile_commands.json" >"$db/compile_commands.json"
out="$db/tidy.txt"
files=()
for f in "$@"; do files+=("$(pwd)/$f"); done
run-clang-tidy -quiet -p "$db" -j "${TIDY_JOBS:-$(nproc)}" "${files[@]}" >"$out" 2>&1 || true
python3 - "$out" "$#" "$build" <<'PY'
import collections, os, re, sys
out, nfiles, build = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
pat = re.compile(r"^(\S+?):(\d+):(\d+): (warning|error): (.*) \[([\w.,-]+)\]$")
seen = {}
for line in open(out, errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # run-clang-tidy may colour its output
    m = pat.match(line.rstrip("\n"))
    if not m:
        continue
    path = m.group(1)
    # Paths come relative to the build directory or through it.
    path = os.path.relpath(os.path.normpath(os.path.join(build, path)))
    seen[(path, int(m.group(2)), int(m.group(3)), m.group(6))] = m.group(5)
by_check = collections.Counter(k[3] for k in seen)
for (path, ln, col, check), msg in sorted(seen.items()):
    print(f"{path}:{ln}:{col}: {msg} [{check}]")
print("--- findings per check (unique locations):")
for check, n in by_check.most_common():
    print(f"{n:6} {check}")
print(f"tidy: {len(seen)} findings in {nfiles} files")
PY
