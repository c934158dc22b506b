#!/usr/bin/env bash
# examples/loop_asio --promises: exit 0 and the summary line that says every
# request was checked, the slow one timed out, the Asio timer ticked while
# the coroutines waited and nothing was left pending.
#
#   example_asio.sh LOOP_ASIO
set -u
out=$("$1" --promises 2>&1)
rc=$?
printf '%s\n' "$out"
want='loop_asio: 8 of 8 requests checked (promises and timers), the slow one timed out (CUDAEV_ERROR_TIMEOUT), the asio timer ticked meanwhile (yes), 0 pending; ok'
if [ $rc != 0 ]; then
  echo "example_asio: FAIL: exit $rc"
  exit 1
fi
if [ "$(printf '%s\n' "$out" | tail -n 1)" != "$want" ]; then
  echo "example_asio: FAIL: the last line is not: $want"
  exit 1
fi
echo "example_asio: ok"
