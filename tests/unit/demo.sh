#!/bin/sh
# tools/demo.sh ends on one line that says what it showed and whether it all
# worked, and exits 1, naming the part, when one failed. It runs the built
# tree (CUDAEV_DEMO_BUILD: nothing is installed or built), once as it is and
# once with a stand-in service that cannot start (CUDAEV_DEMO_SERVER).
#   demo.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v curl >/dev/null || { echo "SKIP: no curl (the demo asks the service with it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

rc=0
CUDAEV_DEMO_BUILD=$build bash "$src/tools/demo.sh" >"$dir/out" 2>&1 || rc=$?
last=$(tail -n 1 "$dir/out")
echo "as built: exit $rc: $last"
[ "$rc" = 0 ] || { cat "$dir/out"; fail "the demo exits $rc"; }
if [ -x "$build/examples/inference_server/inference_server" ]; then
  case "$last" in
    "demo: "*"loop_epoll ok, inference service ok ("*" backend)"*": all worked"*) ;;
    *) fail "last line: $last" ;;
  esac
  # The Python service beside it, where Debian's Python has what it needs.
  if /usr/bin/python3 -c 'import aiohttp, numpy, setuptools, wheel' 2>/dev/null &&
    ! readelf -d "$build/libcudaev.so.1" 2>/dev/null | grep -qE 'lib[at]san'; then
    case "$last" in
      *"inference service ok ("*" backend), Python service ok ("*"): all worked"*) ;;
      *) fail "the Python service did not answer as the C one: $last" ;;
    esac
  fi
else
  case "$last" in
    "demo: "*"loop_epoll ok, inference service not built"*": all worked"*) ;;
    *) fail "last line: $last" ;;
  esac
fi

printf '#!/bin/sh\necho "stand-in service: cannot start" >&2\nexit 1\n' >"$dir/srv"
chmod +x "$dir/srv"
rc=0
CUDAEV_DEMO_BUILD=$build CUDAEV_DEMO_SERVER=$dir/srv bash "$src/tools/demo.sh" >"$dir/out" 2>&1 || rc=$?
last=$(tail -n 1 "$dir/out")
echo "a service that cannot start: exit $rc: $last"
[ "$rc" = 1 ] || { cat "$dir/out"; fail "the demo exits $rc, not 1, when the service fails"; }
case "$last" in
  "demo: "*"loop_epoll ok, inference service FAILED ("*" backend): 1 of "*" failed"*) ;;
  *) fail "last line: $last" ;;
esac
echo "ok: the demo's last line says what worked and what failed"
