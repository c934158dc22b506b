#!/usr/bin/env bash
# Builds cudaev and runs its tests: the `unit` suite, and the `gpu` suite
# (which skips, with a message, on a machine without an NVIDIA GPU).
# Ends with "N passed, N failed, N skipped".
#
#   tools/test.sh [BUILD_DIR] [extra meson setup options...]
#   SUITES="tsan" tools/test.sh ...     other suites (default: "unit gpu")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
shift || true
tools/deps.sh
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$@"
fi
ninja -C "$build"
# shellcheck disable=SC2086
exec tests/gpu/run.sh -b "$build" -o "$build/test-logs" ${SUITES:-unit gpu}
