#!/usr/bin/env bash
# Runs every benchmark program of a build directory on NVIDIA's
# libcudart.so.13 and on ours, interleaved over several rounds, and writes the
# comparison table, raw samples and plots (bench/README.md).
#
#   bench/run.sh [OUTDIR]        (default OUTDIR: <build dir>/bench-out)
#   bench/run.sh --selftest      CPU self-test of this script and benchstat.py
#
# Environment (all optional):
#   CUDAEV_BUILD_DIR      build directory holding bench/programs.txt and the
#                         programs (default: <repo>/build)
#   CUDAEV_LIB_DIR        directory of our libcudart.so.13 (default: build dir)
#   CUDAEV_NVIDIA_CUDART  NVIDIA's library (default: /usr/local/cuda/lib64/libcudart.so.13)
#   BENCH_ROUNDS          interleaved rounds (default 5)
#   BENCH_TIMEOUT         seconds one program run may take (default 60; a
#                         program that timed out on a runtime is not run
#                         there again)
#   BENCH_BUDGET          seconds for all runs; runs that would not fit are
#                         skipped and reported (default 510)
#   BENCH_PROGRAMS        space-separated program names to run (default: all)
#   BENCH_TARGETS         targets file (default: bench/targets.txt)
#   BENCH_PLOTS           auto | matplotlib | gnuplot | plain | none (default
#                         auto: the first of them that works)
#   BENCH_KEEP=1          keep the per-run stdout/stderr (path printed)
#
# Exit status: 0 all targets passed; 1 a target failed or was not measured;
# 2 the harness could not run.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

case "${1:-}" in
  --selftest) exec python3 "$here/test_benchstat.py" ;;
  -h | --help)
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac

build=${CUDAEV_BUILD_DIR:-$repo/build}
outdir=${1:-$build/bench-out}
ours_dir=${CUDAEV_LIB_DIR:-$build}
nvidia_lib=${CUDAEV_NVIDIA_CUDART:-/usr/local/cuda/lib64/libcudart.so.13}
nvidia_dir=$(dirname "$nvidia_lib")
ours_lib=$ours_dir/libcudart.so.13
rounds=${BENCH_ROUNDS:-5}
timeout_s=${BENCH_TIMEOUT:-60}
budget=${BENCH_BUDGET:-510}
targets=${BENCH_TARGETS:-$here/targets.txt}
plots=${BENCH_PLOTS:-auto}
manifest=$build/bench/programs.txt

die() { echo "bench/run.sh: $*" >&2; exit 2; }
[ -r "$manifest" ] || die "no $manifest: build first (meson setup build && ninja -C build)"
[ -e "$nvidia_lib" ] || die "NVIDIA's library $nvidia_lib not found (set CUDAEV_NVIDIA_CUDART)"
[ -e "$ours_lib" ] || echo "bench/run.sh: warning: $ours_lib not found; every cudaev run will fail" >&2
python3 "$here/benchstat.py" check-targets "$targets" >/dev/null || die "bad targets file $targets"
mkdir -p "$outdir" || die "cannot create $outdir"

# Programs and where they run, from the manifest ("<name> <both|cudaev|beside>":
# a 'beside' program runs in NVIDIA's slot, with the build directory after
# NVIDIA's for libcudaev.so.1).
progs=()
declare -A where=()
while read -r name runtimes _ || [ -n "${name:-}" ]; do
  case "$name" in '' | '#'*) continue ;; esac
  if [ -n "${BENCH_PROGRAMS:-}" ] && [[ " $BENCH_PROGRAMS " != *" $name "* ]]; then continue; fi
  [ -x "$build/bench/$name" ] || die "$build/bench/$name is missing: build first"
  progs+=("$name")
  where[$name]=$runtimes
done <"$manifest"
[ "${#progs[@]}" -gt 0 ] || die "no benchmark programs in $manifest"

work=$(mktemp -d "${TMPDIR:-/tmp}/cudaev-bench.XXXXXX") || die "mktemp failed"
if [ "${BENCH_KEEP:-0}" = 1 ]; then
  echo "keeping per-run output in $work"
else
  trap 'rm -rf "$work"' EXIT
fi
runs=$work/runs.tsv
: >"$runs"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
start=$(now)
declare -A longest=() hung=()

# One run of one program on one runtime; appends a line to runs.tsv.
run_one() {
  local prog=$1 rt=$2 round=$3 dir lib out err t0 rc secs used left limit est
  if [ "$rt" = nvidia ]; then dir=$nvidia_dir lib=$nvidia_lib; else dir=$ours_dir lib=$ours_lib; fi
  out=$work/$prog.$rt.r$round.out
  err=$work/$prog.$rt.r$round.err
  used=$(elapsed "$start")
  left=$(awk -v b="$budget" -v u="$used" 'BEGIN { printf "%d", b - u }')
  est=${longest[$prog]:-0}
  if [ -n "${hung[$prog.$rt]:-}" ]; then
    printf 'round %d  %-18s %-7s skipped: timed out in an earlier round\n' "$round" "$prog" "$rt"
    printf '%s\t%s\t%s\tskip-timeout\t0\t%s\t%s\t%s\n' "$prog" "$rt" "$round" "$out" "$err" "$lib" >>"$runs"
    return
  fi
  if [ "$left" -lt 10 ] || awk -v l="$left" -v e="$est" 'BEGIN { exit !(e * 1.2 + 5 > l) }'; then
    printf 'round %d  %-18s %-7s skipped: %ss of the %ss budget left\n' "$round" "$prog" "$rt" "$left" "$budget"
    printf '%s\t%s\t%s\tskip\t0\t%s\t%s\t%s\n' "$prog" "$rt" "$round" "$out" "$err" "$lib" >>"$runs"
    return
  fi
  limit=$timeout_s
  [ "$left" -lt "$limit" ] && limit=$left
  t0=$(now)
  [ "${where[$prog]}" = beside ] && dir=$dir:$build
  LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout -k 5 "$limit" "$build/bench/$prog" >"$out" 2>"$err"
  rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then hung[$prog.$rt]=1; fi
  secs=$(elapsed "$t0")
  if awk -v s="$secs" -v e="$est" 'BEGIN { exit !(s > e) }'; then longest[$prog]=$secs; fi
  printf 'round %d  %-18s %-7s exit %-3d %6ss   (%ss elapsed)\n' "$round" "$prog" "$rt" "$rc" "$secs" "$(elapsed "$start")"
  if [ "$rc" != 0 ]; then
    grep -v '^cudart \|done in ' "$err" | tail -n 3 | sed 's/^/    /'
  fi
  if ! grep -q '^cudart ' "$err"; then
    echo "    no 'cudart <path>' line on stderr: this run's samples are discarded"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$prog" "$rt" "$round" "$rc" "$secs" "$out" "$err" "$lib" >>"$runs"
}

echo "NVIDIA: $(readlink -f "$nvidia_lib")"
echo "cudaev: $(readlink -f "$ours_lib" 2>/dev/null || echo "$ours_lib")"
echo "programs: ${progs[*]}; $rounds rounds; budget ${budget}s"
for ((round = 1; round <= rounds; round++)); do
  for prog in "${progs[@]}"; do
    # Alternate which runtime goes first so drift and warm caches hit both.
    if ((round % 2)); then order=(nvidia cudaev); else order=(cudaev nvidia); fi
    for rt in "${order[@]}"; do
      if [ "${where[$prog]}" = cudaev ] && [ "$rt" = nvidia ]; then continue; fi
      if [ "${where[$prog]}" = beside ] && [ "$rt" = cudaev ]; then continue; fi
      run_one "$prog" "$rt" "$round"
    done
  done
done
echo "all runs: $(elapsed "$start")s"

header=$work/header.md
{
  echo "# cudaev vs NVIDIA's libcudart.so.13"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "- device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/, / (driver /; s/$/)/')"
  else
    echo "- device: unknown (no nvidia-smi)"
  fi
  echo "- host: $(uname -n), $(nproc) CPUs, kernel $(uname -r)"
  if [ -r "$build/bench/commit.txt" ]; then echo "- build of commit: $(cat "$build/bench/commit.txt")"; fi
  echo "- NVIDIA: $(readlink -f "$nvidia_lib"); cudaev: $(readlink -f "$ours_lib" 2>/dev/null || echo "$ours_lib")"
  echo "- command: bench/run.sh $outdir (rounds $rounds, budget ${budget}s, timeout ${timeout_s}s per run); runs took $(elapsed "$start")s"
} >"$header"

python3 "$here/benchstat.py" analyze --runs "$runs" --targets "$targets" --out "$outdir" \
  --header "$header" --plots "$plots"
status=$?
echo "wrote $outdir/table.md, $outdir/samples.csv.gz, $outdir/summary.json and the plots ($(elapsed "$start")s in all)"
exit "$status"
