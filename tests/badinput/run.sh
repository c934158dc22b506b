#!/bin/sh
# The bad-input differential on a machine with a GPU: runs the harness on
# NVIDIA's libcudart.so.13 and on ours, with the devices visible (live and
# destroyed objects are made), and writes OUTDIR/nvidia.txt, ours.txt and
# report.txt (docs/bad-input.md). Exits non-zero if ours crashed or hung in
# any case or fewer than 99 % of the codes are NVIDIA's.
#
#   tests/badinput/run.sh OURS_LIBDIR NVIDIA_LIBCUDART OUTDIR
#
# OURS_LIBDIR is the build directory (libcudart.so.13 and
# tests/badinput/badinput); BADINPUT=path overrides the harness,
# BADINPUT_JOBS (default 8) the children at a time: each holds a context
# and, for a moment, allocations of up to 4 GiB. BADINPUT_TIMEOUT (default
# 30 s) is how long a child may go without finishing a case.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 OURS_LIBDIR NVIDIA_LIBCUDART OUTDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
ours=$(cd "$1" && pwd)
nvidia=$2
out=$3
harness=${BADINPUT:-$ours/tests/badinput/badinput}
mkdir -p "$out"
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then
  echo "note: no NVIDIA GPU here (no /dev/nvidia0): this is the no-device run"
fi
exec python3 "$here/compare.py" --harness "$harness" --nvidia "$nvidia" --ours "$ours" \
  --out "$out" --jobs "${BADINPUT_JOBS:-8}" --timeout "${BADINPUT_TIMEOUT:-30}" --check
