#!/usr/bin/env bash
# The load test of the Python service (docs/python_service.md) against its two
# twins and the C services: wrk on loopback, POST /v1/infer (bench/serve.lua),
# at 1, 16, 256 and 4096 connections, each point bounded in time. For each
# server and point: requests/s, p50/p99/p99.9, errors, and the server's CPU in
# cores (user + system of the server and every process under it: the Python
# master and its workers). Writes serve_py.md (the table and the
# targets), serve_py.csv, serve_py.png (matplotlib, when it imports), the raw
# wrk lines and a log.
#
#   bench/serve_py.sh [--quick] [OUTDIR]     (default OUTDIR: <build dir>/serve-py-out)
#
# Servers (SERVE_SERVERS, default all five):
#   py-cudaev    examples/python_service/server.py --wait cudaev (the service)
#   py-executor  the same with --wait executor (run_in_executor(None, event.synchronize))
#   py-poll      the same with --wait poll (query() + asyncio.sleep(0))
#   py-cudaev-nospin  --wait cudaev --cudaev-spin-us 0 (not in the default set)
#   py-cudaev-words   --wait cudaev --cudaev-markers auto: words, not events, mark
#                     a lone batch's end (not in the default set)
#   async        examples/inference_server --loop-threads W (the C service)
#   twin         examples/inference_server_blocking on NVIDIA's libcudart
# --quick: a CPU smoke run (--model-device cpu, --backend cpu; 1, 16 and 64
# connections, 2 s each): checks the harness on a machine without a GPU.
# Environment (all optional):
#   SERVE_BUILD_DIR      build directory (default <repo>/.gpu/build if present, else <repo>/build)
#   SERVE_CONNECTIONS    connection counts (default "1 16 256 4096")
#   SERVE_DURATION       seconds measured per point (default 5)
#   SERVE_WARMUP         seconds of load before a server's first point (default 1)
#   SERVE_ROUNDS         rounds of every server, orders rotated (default 1); medians reported
#   SERVE_THREADS        wrk threads (default 8, at most the connections)
#   SERVE_WORKERS        W: Python workers and the C service's loop threads (default 4)
#   SERVE_PY             the Python with torch, aiohttp, uvloop (default python3)
#   SERVE_PY_ARGS        more flags for the Python service (default none)
#   SERVE_ARGS           more flags for the C servers (default none; with --socket-timing
#                        the report adds the C service's own p99 waits in the socket)
#   CUDAEV_NVIDIA_CUDART NVIDIA's library (default /usr/local/cuda/lib64/libcudart.so.13)
#   WRK                  wrk binary (default: wrk on PATH, else .device/wrk/wrk)
# With the defaults: 20 points x (5 + ~2) s plus five start-ups, about 3 minutes.
# Exit status: 0 every target held; 1 one did not or could not be measured;
# 2 the harness could not run.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
quick=false
case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  --quick) quick=true; shift ;;
esac
if [ -n "${SERVE_BUILD_DIR:-}" ]; then build=$SERVE_BUILD_DIR
elif [ -d "$repo/.gpu/build" ]; then build=$repo/.gpu/build
else build=$repo/build; fi
build=$(cd "$build" && pwd) || exit 2
out=${1:-$build/serve-py-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
if $quick; then
  conns=${SERVE_CONNECTIONS:-1 16 64} dur=${SERVE_DURATION:-2} workers=${SERVE_WORKERS:-1}
  py_dev=cpu c_backend=cpu
else
  conns=${SERVE_CONNECTIONS:-1 16 256 4096} dur=${SERVE_DURATION:-5} workers=${SERVE_WORKERS:-4}
  py_dev=cuda c_backend=gpu
fi
warm=${SERVE_WARMUP:-1}
servers=${SERVE_SERVERS:-py-cudaev py-executor py-poll async twin}
rounds=${SERVE_ROUNDS:-1}
py=${SERVE_PY:-python3}
nvidia_lib=${CUDAEV_NVIDIA_CUDART:-/usr/local/cuda/lib64/libcudart.so.13}
async_bin=$build/examples/inference_server/inference_server
twin_bin=$build/examples/inference_server_blocking/inference_server_blocking
py_server=$repo/examples/python_service/server.py
die() { echo "bench/serve_py.sh: $*" >&2; exit 2; }
wrk=${WRK:-$(command -v wrk || true)}
[ -z "$wrk" ] && [ -x "$repo/.device/wrk/wrk" ] && wrk=$repo/.device/wrk/wrk
[ -n "$wrk" ] && [ -x "$wrk" ] || die "no wrk (Debian wrk; tools/gpu-pack.sh carries it to .device/wrk)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if cublas_dir=$("$repo/tools/find-cublas.sh" 2>/dev/null); then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cublas_dir
fi
# The cudaev package: installed, or on PYTHONPATH (tools/gpu-check.sh puts the
# carried wheel there); python/ itself has no built extension.
work=$(mktemp -d "${TMPDIR:-/tmp}/serve-py.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
log=$out/serve_py-log.txt
raw=$out/serve_py-raw.txt
csv=$out/serve_py.csv
: >"$log"
: >"$raw"
echo "server,connections,rps,p50_ms,p99_ms,p999_ms,max_ms,errors,cpu_cores,threads,requests,server_p99_ms,socket_p99_ms,send_p99_ms,machine_cores,steal_cores" >"$csv"
say() { echo "$*" | tee -a "$log"; }

# CPU seconds (user + system) of a process and everything under it.
tree_pids() { echo "$1"; for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_pids "$c"; done; }
cpu_s() {
  local hz t=0 p
  hz=$(getconf CLK_TCK)
  for p in $(tree_pids "$1"); do
    t=$(awk -v t="$t" -v hz="$hz" '{ print t + ($14 + $15) / hz }' "/proc/$p/stat" 2>/dev/null || echo "$t")
  done
  echo "$t"
}
# The whole machine's CPU from /proc/stat, in seconds: "busy steal" (busy:
# user, nice, system, irq, softirq; steal: time the hypervisor ran something
# else while a vCPU wanted to run). Around a point they tell whether anything
# besides the server and wrk ran, and whether the host took our CPUs away.
machine_s() {
  awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print ($2 + $3 + $4 + $7 + $8) / hz, $9 / hz; exit }' /proc/stat
}
threads() { local n=0 p; for p in $(tree_pids "$1"); do
  n=$((n + $(awk '/^Threads:/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo $n; }

start_server() { # kind -> sets pid, port
  local kind=$1
  rm -f "$work/port"
  case $kind in
    py-*)
      local mode=${kind#py-} extra=""
      [ "$mode" = cudaev-nospin ] && { mode=cudaev; extra="--cudaev-spin-us 0"; }
      [ "$mode" = cudaev-words ] && { mode=cudaev; extra="--cudaev-markers auto"; }
      # shellcheck disable=SC2086
      "$py" "$py_server" --wait "$mode" --model-device "$py_dev" --workers "$workers" \
        --port 0 --port-file "$work/port" --deadline-ms 30000 --connection-timeout 60 \
        $extra ${SERVE_PY_ARGS:-} >>"$log" 2>&1 &
      ;;
    async)
      # shellcheck disable=SC2086
      "$async_bin" --backend "$c_backend" --loop-threads "$workers" --port 0 \
        --port-file "$work/port" --max-connections 10000 --deadline-ms 30000 \
        --connection-timeout 60 ${SERVE_ARGS:-} >>"$log" 2>&1 &
      ;;
    twin)
      local lp=${LD_LIBRARY_PATH:-}
      [ "$c_backend" = gpu ] && lp=$(dirname "$nvidia_lib")${lp:+:$lp}
      # shellcheck disable=SC2086
      LD_LIBRARY_PATH=$lp "$twin_bin" --backend "$c_backend" --port 0 --port-file "$work/port" \
        --max-connections 10000 --deadline-ms 30000 --connection-timeout 60 ${SERVE_ARGS:-} \
        >>"$log" 2>&1 &
      ;;
    *) die "unknown server $kind" ;;
  esac
  pid=$!
  for _ in $(seq 1200); do
    [ -s "$work/port" ] && break
    kill -0 "$pid" 2>/dev/null || { say "$kind: did not start (log: $log)"; return 1; }
    sleep 0.05
  done
  [ -s "$work/port" ] || { say "$kind: no port after 60 s"; kill "$pid"; return 1; }
  port=$(cat "$work/port")
  say "$kind: pid $pid, port $port"
}

stop_server() {
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  local rc=$?
  [ "$rc" = 0 ] || say "  (server exited $rc)"
}

# The C servers' /metrics into a file (one process: one scrape sees all of
# it; a Python worker's would see only its own), for prom_hist.py.
scrape() { # kind file
  rm -f "$2"
  case $1 in async | twin) curl -sf --max-time 30 "http://127.0.0.1:$port/metrics" -o "$2" || true ;; esac
}

run_wrk() { # connections seconds -> the SERVE line
  local c=$1 d=$2 t=${SERVE_THREADS:-8}
  [ "$t" -gt "$c" ] && t=$c
  SERVE_INPUTS=64 "$wrk" -t "$t" -c "$c" -d "${d}s" --timeout 30s -s "$here/serve.lua" \
    "http://127.0.0.1:$port/v1/infer" 2>&1 | tee -a "$raw" | sed -n 's/^SERVE //p'
}

say "serve_py: build $build, python $($py --version 2>&1), $workers worker(s), model on $py_dev"
say "points: $conns connections x ${dur}s; wrk $wrk"
say "date: $(date -u '+%F %T') UTC; host $(uname -n), $(nproc) CPUs; fd limit $(ulimit -n)"
command -v nvidia-smi >/dev/null && say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
t_all=$(date +%s)
# Each round runs every server once, in an order rotated by one from the
# round before (the machine drifts, and the first server of a run pays for
# a cold GPU): the report gives each point's median over the rounds.
order=$servers
for round in $(seq "$rounds"); do
[ "$rounds" -gt 1 ] && say "round $round: $order"
for kind in $order; do
  start_server "$kind" || continue
  [ "$warm" -gt 0 ] && run_wrk 16 "$warm" >/dev/null
  for c in $conns; do
    scrape "$kind" "$work/m0"
    c0=$(cpu_s "$pid")
    m0=$(machine_s)
    ( while kill -0 "$pid" 2>/dev/null; do threads "$pid"; sleep 0.5; done ) >"$work/threads" &
    sampler=$!
    line=$(run_wrk "$c" "$dur")
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    c1=$(cpu_s "$pid")
    m1=$(machine_s)
    scrape "$kind" "$work/m1"
    thr=$(sort -n "$work/threads" | tail -n 1)
    python3 - "$here" "$kind" "$c" "$c0" "$c1" "${thr:-0}" "$work/m0" "$work/m1" "$line" \
      "$m0" "$m1" >>"$csv" <<'PY'
import json, sys
here, kind, c, c0, c1, thr, m0, m1, line, mach0, mach1 = sys.argv[1:]
sys.path.insert(0, here)
from prom_hist import load, p99_ms
try:
    w = json.loads(line)
except ValueError:
    print(f"{kind},{c},,,,,,,,,,,,,,")
    sys.exit()
# The C service's own p99s: its handling, and with --socket-timing in
# SERVE_ARGS the waits in the socket before a request is read and after its
# answer is ready (empty for the Python servers and what a server lacks).
a, b = load(m0), load(m1)
own = ",".join(p99_ms(a, b, h) for h in ("infer_request_duration_seconds",
                                         "infer_socket_wait_seconds", "infer_send_wait_seconds"))
secs = w["duration_us"] / 1e6
# The machine's busy and stolen cores over the point (wrk's own duration;
# the samples bracket it within the few ms of starting and reaping wrk).
(b0, s0), (b1, s1) = (map(float, m.split()) for m in (mach0, mach1))
machine = f"{(b1 - b0) / secs:.2f},{(s1 - s0) / secs:.2f}"
errors = sum(w[k] for k in ("errors_connect", "errors_read", "errors_write", "errors_status",
                            "errors_timeout"))
print(f"{kind},{c},{w['requests'] / secs:.1f},{w['p50_us'] / 1e3:.3f},{w['p99_us'] / 1e3:.3f},"
      f"{w['p999_us'] / 1e3:.3f},{w['max_us'] / 1e3:.3f},{errors},"
      f"{(float(c1) - float(c0)) / secs:.2f},{thr},{w['requests']},{own},{machine}")
PY
    say "  $(tail -n 1 "$csv")"
  done
  stop_server
done
set -- $order
order="${*:2} $1"
done
say "all points: $(($(date +%s) - t_all)) s"
python3 "$here/serve_py_report.py" "$csv" "$out" --header "$log"
