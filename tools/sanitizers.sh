#!/bin/sh
# Builds the CPU unit suite under ASan+UBSan (build-asan) and TSan
# (build-tsan) and runs it in each, printing meson's summary.
# Under TSan only suite `tsan` runs (plain programs that are also in
# `unit`): Criterion aborts at start under TSan, its fork arena clashes with
# TSan's shadow memory (Snaipe/Criterion#274).
#   tools/sanitizers.sh [asan|tsan]...   (default: both)
# Exit status: nonzero if any configuration fails to build or any test fails.
set -u
cd "$(dirname "$0")/.." || exit 1
kinds=${*:-asan tsan}
status=0
log=$(mktemp); trap 'rm -f "$log"' EXIT
for kind in $kinds; do
  case $kind in
  asan) dir=build-asan; suite=unit; opts='-Db_sanitize=address,undefined -Db_lundef=false' ;;
  tsan) dir=build-tsan; suite=tsan; opts='-Db_sanitize=thread -Db_lundef=false' ;;
  *) echo "unknown sanitizer: $kind" >&2; exit 2 ;;
  esac
  echo "== $kind ($dir)"
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$dir" -Dgpu_programs=false -Dbuildtype=debug $opts >"$log" 2>&1 ||
      { cat "$log"; status=1; continue; }
  fi
  ninja -C "$dir" >"$log" 2>&1 || { tail -40 "$log"; status=1; continue; }
  # Reports fail the test (and the process) instead of scrolling past.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    meson test -C "$dir" --suite "$suite" --print-errorlogs --num-processes 2 2>&1 |
    sed -n '/^Ok:/,/^Timeout:/p;/FAIL/p'
  grep -q '"result": "\(FAIL\|TIMEOUT\|ERROR\)"' "$dir/meson-logs/testlog.json" 2>/dev/null && status=1
done
exit $status
