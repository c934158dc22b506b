#!/usr/bin/env bash
# The load test of the inference service against its blocking twin
# (docs/inference_server.md): wrk on loopback, POST /v1/infer, at several
# connection counts, each point bounded in time. For each server and point:
# requests/s, p50/p99/p99.9 latency, errors, the server's CPU (cores used)
# and threads, and from its /metrics the GPU time per request against the
# wall latency, and the server's own p99 (its histogram's bucket, from the
# request's headers to its answer: a wrk p99 far above it is time spent
# before the request is read or after it is answered; with --socket-timing
# in SERVE_ARGS, the service's p99 waits in the socket before a request is
# read and after its answer is ready tell which). Writes a table, a CSV, the
# raw wrk lines and a plot.
#
#   bench/serve.sh [OUTDIR]       (default OUTDIR: <build dir>/serve-out)
#
# Servers (SERVE_SERVERS, default all three):
#   async        examples/inference_server on our runtime (its RPATH)
#   twin-nvidia  examples/inference_server_blocking on NVIDIA's libcudart
#   twin-ours    the same twin binary on ours (LD_LIBRARY_PATH picks)
#   floor        bench-http-floor, not in the default: one thread that answers
#                a fixed 200 without parsing or model, the most any one-thread
#                server can do on this host (bench/http_floor.c)
# Environment (all optional):
#   SERVE_BUILD_DIR      build directory (default <repo>/.gpu/build if present, else <repo>/build)
#   SERVE_CONNECTIONS    connection counts (default "16 256 4096")
#   SERVE_DURATION       seconds measured per point (default 8)
#   SERVE_WARMUP         seconds of load before a server's first point (default 2)
#   SERVE_THREADS        wrk threads (default 8, at most the connections)
#   SERVE_BACKEND        gpu (default) or cpu (a dry run on a machine without GPU)
#   SERVE_ARGS           more server flags, for both (default: none; the
#                        model is 64,256,256,16, batches of up to 64 in 200 us)
#   CUDAEV_NVIDIA_CUDART NVIDIA's library (default /usr/local/cuda/lib64/libcudart.so.13)
#   WRK                  wrk binary (default: wrk on PATH, else .device/wrk/wrk)
# About 9 points x (SERVE_DURATION + 3) s: two minutes with the defaults.
# Exit status: 0 the target held (at the most connections, async >= 2x
# twin-nvidia's requests/s at equal or lower p99); 1 it did not or could
# not be measured; 2 the harness could not run.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac
if [ -n "${SERVE_BUILD_DIR:-}" ]; then build=$SERVE_BUILD_DIR
elif [ -d "$repo/.gpu/build" ]; then build=$repo/.gpu/build
else build=$repo/build; fi
build=$(cd "$build" && pwd) || exit 2
out=${1:-$build/serve-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
conns=${SERVE_CONNECTIONS:-16 256 4096}
dur=${SERVE_DURATION:-8}
warm=${SERVE_WARMUP:-2}
backend=${SERVE_BACKEND:-gpu}
servers=${SERVE_SERVERS:-async twin-nvidia twin-ours}
nvidia_lib=${CUDAEV_NVIDIA_CUDART:-/usr/local/cuda/lib64/libcudart.so.13}
async_bin=$build/examples/inference_server/inference_server
twin_bin=$build/examples/inference_server_blocking/inference_server_blocking
floor_bin=$build/bench/bench-http-floor
die() { echo "bench/serve.sh: $*" >&2; exit 2; }
wrk=${WRK:-$(command -v wrk || true)}
[ -z "$wrk" ] && [ -x "$repo/.device/wrk/wrk" ] && wrk=$repo/.device/wrk/wrk
[ -n "$wrk" ] && [ -x "$wrk" ] || die "no wrk (Debian wrk; tools/gpu-pack.sh carries it to .device/wrk)"
[ -x "$async_bin" ] && [ -x "$twin_bin" ] || die "no servers under $build/examples: build first"
# Thousands of connections: as many fds as we may have, for wrk and the servers.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge 9000 ] ||
  echo "bench/serve.sh: warning: open-file limit $(ulimit -n): 4096 connections may fail" >&2
# cuBLAS: the servers find it in the toolkit, else where find-cublas.sh says.
if cublas_dir=$("$repo/tools/find-cublas.sh"); then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cublas_dir
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/serve.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
log=$out/serve-log.txt
: >"$log"
raw=$out/serve-raw.txt
: >"$raw"
csv=$out/serve.csv
echo "server,connections,rps,p50_ms,p99_ms,p999_ms,max_ms,errors,cpu_cores,threads,gpu_ms_per_req,wall_ms_mean,batch_mean,requests,server_p99_ms,socket_p99_ms,send_p99_ms" >"$csv"
say() { echo "$*" | tee -a "$log"; }

# The server's CPU time in seconds (user + system), from /proc.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status"; }
# One /metrics value (0 when absent).
metric() { awk -v m="$2" '$1 == m { v = $2 } END { print v + 0 }' "$1"; }

start_server() { # kind -> sets pid, port
  local kind=$1 bin env_path extra=${SERVE_ARGS:-}
  case $kind in
    async) bin=$async_bin env_path=${LD_LIBRARY_PATH:-} ;;
    twin-nvidia) bin=$twin_bin env_path=$(dirname "$nvidia_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
    twin-ours) bin=$twin_bin env_path=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
    # The floor answers a fixed 200 whatever the model: the services' flags are not its.
    floor) bin=$floor_bin env_path=${LD_LIBRARY_PATH:-} extra= ;;
    *) die "unknown server $kind" ;;
  esac
  rm -f "$work/port"
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$env_path "$bin" --backend "$backend" --port 0 --port-file "$work/port" \
    --max-connections 10000 --deadline-ms 30000 --connection-timeout 60 $extra \
    >>"$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ -s "$work/port" ] && break
    kill -0 "$pid" 2>/dev/null || { say "$kind: did not start (log: $log)"; return 1; }
    sleep 0.05
  done
  port=$(cat "$work/port")
  local lib
  lib=$(grep -o '/[^ ]*libcudart\.so[^ ]*' "/proc/$pid/maps" | sort -u | tr '\n' ' ')
  say "$kind: pid $pid, port $port, libcudart: ${lib:-none (CPU build)}"
}

stop_server() {
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  local rc=$?
  [ "$rc" = 0 ] || say "  (server exited $rc)"
}

run_wrk() { # connections seconds -> the SERVE line on stdout
  local c=$1 d=$2 t=${SERVE_THREADS:-8}
  [ "$t" -gt "$c" ] && t=$c
  SERVE_INPUTS=$inputs "$wrk" -t "$t" -c "$c" -d "${d}s" --timeout 30s -s "$here/serve.lua" \
    "http://127.0.0.1:$port/v1/infer" 2>&1 | tee -a "$raw" | sed -n 's/^SERVE //p'
}

inputs=$(echo "${SERVE_ARGS:-}" | sed -n 's/.*--layers[= ]\([0-9]*\).*/\1/p')
inputs=${inputs:-64}
say "serve: build $build, backend $backend, points: $conns connections x ${dur}s, wrk $wrk"
say "date: $(date -u '+%F %T') UTC; host $(uname -n), $(nproc) CPUs; fd limit $(ulimit -n)"
command -v nvidia-smi >/dev/null && say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1) ($(nvidia-smi -L | wc -l) GPUs)"
t_all=$(date +%s)
for kind in $servers; do
  start_server "$kind" || continue
  if [ "$warm" -gt 0 ]; then run_wrk 64 "$warm" >/dev/null; fi
  for c in $conns; do
    curl_metrics() { python3 - "$port" "$1" <<'PY'
import sys, urllib.request
open(sys.argv[2], "wb").write(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read())
PY
    }
    curl_metrics "$work/m0" || true
    c0=$(cpu_s "$pid")
    maxthr=0
    ( while kill -0 "$pid" 2>/dev/null; do threads "$pid"; sleep 0.5; done ) >"$work/threads" &
    sampler=$!
    line=$(run_wrk "$c" "$dur")
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    maxthr=$(sort -n "$work/threads" | tail -n 1)
    c1=$(cpu_s "$pid")
    curl_metrics "$work/m1" || true
    python3 - "$here" "$kind" "$c" "$c0" "$c1" "${maxthr:-0}" "$work/m0" "$work/m1" "$line" >>"$csv" <<'PY'
import json, sys
here, kind, c, c0, c1, thr, m0, m1, line = sys.argv[1:]
sys.path.insert(0, here)
from prom_hist import load, p99_ms
a, b = load(m0), load(m1)
d = lambda k: b.get(k, 0) - a.get(k, 0)
try:
    w = json.loads(line)
except ValueError:
    print(f"{kind},{c},,,,,,,,,,,,,,,", flush=True)
    sys.exit()
secs = w["duration_us"] / 1e6
errors = w["errors_connect"] + w["errors_read"] + w["errors_write"] + w["errors_status"] + w["errors_timeout"]
rows, gpu = d("infer_batch_rows_total"), d("infer_gpu_seconds_total")
lat_n, lat_s = d("infer_request_duration_seconds_count"), d("infer_request_duration_seconds_sum")
batches = d("infer_batch_size_count")
# The service's own p99s (prom_hist.py): a request's handling, and with
# --socket-timing its wait in the socket before it is read and after its
# answer is ready; beside wrk's p99 they tell where a tail is.
own = ",".join(p99_ms(a, b, h) for h in ("infer_request_duration_seconds",
                                         "infer_socket_wait_seconds", "infer_send_wait_seconds"))
print(f"{kind},{c},{w['requests'] / secs:.1f},{w['p50_us'] / 1e3:.3f},{w['p99_us'] / 1e3:.3f},"
      f"{w['p999_us'] / 1e3:.3f},{w['max_us'] / 1e3:.3f},{errors},"
      f"{(float(c1) - float(c0)) / secs:.2f},{thr},"
      f"{gpu / rows * 1e3 if rows else 0:.4f},{lat_s / lat_n * 1e3 if lat_n else 0:.3f},"
      f"{rows / batches if batches else 0:.1f},{w['requests']},{own}")
PY
    say "  $(tail -n 1 "$csv")"
  done
  stop_server
done
say "all points: $(($(date +%s) - t_all)) s"
python3 "$here/serve_report.py" "$csv" "$out" --header "$log"
