#!/usr/bin/env bash
# nginx in front of several inference service processes, on one host, all
# inside one directory (docs/scale-out.md).
#
#   deploy/scale-out.sh start DIR [OPTION]... [-- SERVICE_ARGUMENT...]
#   deploy/scale-out.sh restart DIR I     start backend I again, on its port
#   deploy/scale-out.sh stop DIR          nginx, then the backends (drained)
#
# start options:
#   --listen ADDR:PORT   where nginx listens (default 127.0.0.1:8000)
#   --count N            service processes to start (default 2)
#   --server PATH        the service (default build/examples/inference_server/inference_server)
#   --backend gpu|cpu|auto  the service's backend (default auto: gpu where
#                        /dev/nvidia0 exists); gpu gives process I the GPU
#                        I modulo the GPUs there (--devices), one per GPU
#                        where there are as many GPUs as processes
#   --backends H:P,H:P   start no service: front these (any HTTP service with
#                        POST /v1/..., GET /health and GET /metrics)
#   --max-fails N        failures within --fail-timeout that take a backend
#                        out of the rotation (default 1)
#   --fail-timeout S     how long it stays out before nginx tries it again,
#                        and the window of --max-fails (default 5)
#   --read-timeout S     nginx's wait for a backend's answer (default 30)
#   --workers N          nginx worker processes (default 2)
#   --ready-timeout S    the longest a process may take to answer /health (default 60)
#
# In DIR: backend-I.{log,pid,port,args}, backends (H:P a line), and nginx/
# (nginx.conf, nginx.pid, error.log, access.log, tmp/). Run as root, nginx
# runs as nobody (setpriv) and nginx/ is given to it; the services run as the
# caller. Readiness is polled (curl on /health and /nginx_status), never slept.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

die() {
  echo "scale-out: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

# A process that exited but was not reaped yet (state Z) counts as gone.
alive() {
  [ -r "/proc/$1/stat" ] || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# ours PID TEXT: PID is alive and its command line holds TEXT (the prefix
# or port file of this DIR), so a stale pid file never names another process.
ours() {
  local c
  alive "$1" || return 1
  c=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $c == *"$2"* ]]
}

# wait_http URL PID SECONDS WHAT: polls until URL answers 200; fails at once
# if PID (when not empty) has exited.
wait_http() {
  local url=$1 pid=$2 secs=$3 what=$4 deadline
  deadline=$(($(date +%s%N) / 1000000 + secs * 1000))
  until curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null; do
    if [ -n "$pid" ] && ! alive "$pid"; then
      die "$what exited before answering $url"
    fi
    [ $(($(date +%s%N) / 1000000)) -lt "$deadline" ] || die "$what: no 200 from $url within ${secs}s"
    sleep 0.05
  done
}

# wait_gone PID SECONDS: polls until PID has exited; 1 if it has not.
wait_gone() {
  local pid=$1 deadline
  deadline=$(($(date +%s%N) / 1000000 + $2 * 1000))
  while alive "$pid"; do
    [ $(($(date +%s%N) / 1000000)) -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

find_nginx() {
  command -v nginx 2>/dev/null && return
  [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx && return
  die "nginx not found (Debian package nginx)"
}

# start_backend DIR I PORT: starts service I from DIR/backend-I.args on PORT
# (0: a free one) and waits for its /health.
start_backend() {
  local dir=$1 i=$2 port=$3 ready=$4 pid
  local -a args
  mapfile -d '' args <"$dir/backend-$i.args"
  rm -f "$dir/backend-$i.port"
  "${args[@]}" --listen 127.0.0.1 --port "$port" --port-file "$dir/backend-$i.port" \
    </dev/null >>"$dir/backend-$i.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/backend-$i.pid"
  # The port file is written after the socket listens; it may be seen
  # empty for a moment.
  local deadline=$(($(date +%s%N) / 1000000 + ready * 1000))
  until grep -qx '[0-9]\+' "$dir/backend-$i.port" 2>/dev/null; do
    alive "$pid" || die "backend $i exited at start (log: $dir/backend-$i.log):
$(tail -n 5 "$dir/backend-$i.log")"
    [ $(($(date +%s%N) / 1000000)) -lt "$deadline" ] || die "backend $i: no port within ${ready}s"
    sleep 0.05
  done
  port=$(cat "$dir/backend-$i.port")
  wait_http "http://127.0.0.1:$port/health" "$pid" "$ready" "backend $i"
  echo "scale-out: backend $i: pid $pid on 127.0.0.1:$port"
}

cmd_start() {
  local dir=$1
  shift
  local listen=127.0.0.1:8000 count=2 server=$root/build/examples/inference_server/inference_server
  local backend=auto backends="" max_fails=1 fail_timeout=5 read_timeout=30 workers=2 ready=60
  while [ $# -gt 0 ]; do
    case $1 in
      -- | -h | --help) ;;
      *) [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case $1 in
      --listen) listen=$2 ;;
      --count) count=$2 ;;
      --server) server=$2 ;;
      --backend) backend=$2 ;;
      --backends) backends=$2 ;;
      --max-fails) max_fails=$2 ;;
      --fail-timeout) fail_timeout=$2 ;;
      --read-timeout) read_timeout=$2 ;;
      --workers) workers=$2 ;;
      --ready-timeout) ready=$2 ;;
      --)
        shift
        break
        ;;
      -h | --help)
        usage
        exit 0
        ;;
      *) die "unknown option '$1' (--help lists them)" ;;
    esac
    shift 2
  done
  local n
  for n in "$count" "$max_fails" "$fail_timeout" "$read_timeout" "$workers" "$ready"; do
    [[ $n =~ ^[1-9][0-9]{0,5}$ ]] || die "'$n': want a whole number from 1"
  done
  [[ $listen =~ ^[0-9.]+:[1-9][0-9]*$ ]] || die "--listen '$listen': want IPV4:PORT"
  local nginx
  nginx=$(find_nginx)
  command -v curl >/dev/null || die "curl not found (Debian package curl)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/nginx/nginx.pid" ] && ours "$(cat "$dir/nginx/nginx.pid")" "$dir/nginx"; then
    die "$dir: nginx is already running there (stop it first)"
  fi
  : >"$dir/backends"
  rm -f "$dir"/backend-*.pid "$dir/nginx/nginx.pid"
  # A start that fails half-way stops what it started.
  trap 'echo "scale-out: stopping what was started" >&2; cmd_stop "$dir" >/dev/null 2>&1' EXIT

  if [ -n "$backends" ]; then
    local b
    for b in ${backends//,/ }; do
      [[ $b =~ ^[A-Za-z0-9.-]+:[1-9][0-9]*$ ]] || die "--backends: '$b': want HOST:PORT"
      echo "$b" >>"$dir/backends"
    done
  else
    [ -x "$server" ] || die "$server: no such program (build first, or --server)"
    local ngpu=0 d
    for d in /dev/nvidia[0-9]*; do [ -e "$d" ] && ngpu=$((ngpu + 1)); done
    if [ "$backend" = auto ]; then
      backend=cpu
      [ "$ngpu" -gt 0 ] && backend=gpu
    fi
    case $backend in
      cpu) ;;
      gpu) [ "$ngpu" -gt 0 ] || die "--backend gpu: no /dev/nvidia0 here" ;;
      *) die "--backend '$backend': want gpu, cpu or auto" ;;
    esac
    local i
    for ((i = 0; i < count; i++)); do
      local -a args=("$server" --backend "$backend")
      [ "$backend" = gpu ] && args+=(--devices $((i % ngpu)))
      args+=("$@")
      printf '%s\0' "${args[@]}" >"$dir/backend-$i.args"
      : >"$dir/backend-$i.log"
      start_backend "$dir" "$i" 0 "$ready"
      echo "127.0.0.1:$(cat "$dir/backend-$i.port")" >>"$dir/backends"
    done
  fi

  # The configuration: one server line, one upstream and two locations per backend.
  local prefix=$dir/nginx servers="" ups="" locs="" i=0 b
  mkdir -p "$prefix/tmp"
  while read -r b; do
    servers+="        server $b max_fails=$max_fails fail_timeout=${fail_timeout}s;"$'\n'
    ups+="    upstream backend$i {"$'\n'"        server $b;"$'\n'"        keepalive 2;"$'\n'"    }"$'\n'
    locs+="        location ~ ^/backend/$i/(health|metrics)\$ {"$'\n'
    locs+="            proxy_pass http://backend$i/\$1;"$'\n'
    locs+="            proxy_http_version 1.1;"$'\n'
    locs+="            proxy_set_header Connection \"\";"$'\n'
    locs+="            proxy_next_upstream off;"$'\n'
    locs+="            proxy_connect_timeout 1s;"$'\n'
    locs+="            proxy_read_timeout 5s;"$'\n'
    locs+="        }"$'\n'
    i=$((i + 1))
  done <"$dir/backends"
  [ "$i" -gt 0 ] || die "no backends"
  SERVERS=$servers UPS=$ups LOCS=$locs PREFIX=$prefix LISTEN=$listen WORKERS=$workers \
    READ_TIMEOUT=${read_timeout}s awk '
    /^@UPSTREAM_SERVERS@$/ { printf "%s", ENVIRON["SERVERS"]; next }
    /^@BACKEND_UPSTREAMS@$/ { printf "%s", ENVIRON["UPS"]; next }
    /^@BACKEND_LOCATIONS@$/ { printf "%s", ENVIRON["LOCS"]; next }
    {
      gsub(/@PREFIX@/, ENVIRON["PREFIX"]); gsub(/@LISTEN@/, ENVIRON["LISTEN"])
      gsub(/@WORKERS@/, ENVIRON["WORKERS"]); gsub(/@READ_TIMEOUT@/, ENVIRON["READ_TIMEOUT"])
      print
    }' "$here/nginx.conf.in" >"$prefix/nginx.conf"

  # nginx never runs as root here: as root, it runs as nobody, which needs
  # its prefix and a way through the directories above it.
  local -a as=()
  if [ "$(id -u)" = 0 ]; then
    as=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
    chown -R nobody "$prefix"
    chmod a+x "$dir"
  fi
  "${as[@]}" "$nginx" -p "$prefix" -c "$prefix/nginx.conf" -t -q ||
    die "nginx rejected $prefix/nginx.conf"
  "${as[@]}" "$nginx" -p "$prefix" -c "$prefix/nginx.conf" ||
    die "nginx did not start (see $prefix/error.log)"
  local deadline=$(($(date +%s%N) / 1000000 + ready * 1000))
  until grep -qx '[0-9]\+' "$prefix/nginx.pid" 2>/dev/null; do
    [ $(($(date +%s%N) / 1000000)) -lt "$deadline" ] || die "nginx wrote no pid file"
    sleep 0.05
  done
  wait_http "http://$listen/nginx_status" "$(cat "$prefix/nginx.pid")" "$ready" nginx
  wait_http "http://$listen/health" "" "$ready" "nginx's /health"
  trap - EXIT
  echo "scale-out: nginx (pid $(cat "$prefix/nginx.pid")) on http://$listen/ in front of" \
    "$(paste -sd' ' "$dir/backends")"
}

cmd_restart() {
  local dir i=$2
  dir=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
  [ -f "$dir/backend-$i.args" ] || die "$dir: no backend $i that this script started"
  local pid
  pid=$(cat "$dir/backend-$i.pid")
  ours "$pid" "$dir/backend-$i.port" && die "backend $i (pid $pid) is still running"
  local port
  port=$(sed -n "$((i + 1))s/.*://p" "$dir/backends")
  start_backend "$dir" "$i" "$port" 60
}

cmd_stop() {
  local dir status=0 pid f
  dir=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
  if [ -f "$dir/nginx/nginx.pid" ]; then
    pid=$(cat "$dir/nginx/nginx.pid")
    # QUIT: the workers finish the requests they have, then exit.
    if ours "$pid" "$dir/nginx"; then
      kill -QUIT "$pid" 2>/dev/null || true
      wait_gone "$pid" 10 || {
        echo "scale-out: nginx (pid $pid) still running after 10 s: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        status=1
      }
    fi
  fi
  for f in "$dir"/backend-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    ours "$pid" "${f%.pid}.port" || continue
    # TERM: the service drains (answers what is in flight) and exits.
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" 15 || {
      echo "scale-out: backend pid $pid still running after 15 s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      status=1
    }
  done
  return $status
}

[ $# -ge 1 ] || {
  usage >&2
  exit 2
}
case $1 in
  start)
    [ $# -ge 2 ] || die "start DIR"
    shift
    cmd_start "$@"
    ;;
  restart)
    [ $# -eq 3 ] || die "restart DIR I"
    [[ $3 =~ ^[0-9]+$ ]] || die "restart: '$3': want a backend number"
    cmd_restart "$2" "$3"
    ;;
  stop)
    [ $# -eq 2 ] || die "stop DIR"
    cmd_stop "$2"
    ;;
  -h | --help) usage ;;
  *) die "unknown command '$1' (start, restart, stop; --help)" ;;
esac
