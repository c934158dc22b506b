#!/usr/bin/env python3
"""libcudart.so.13 loads wherever NVIDIA's loads.

  loadable.py LIBCUDART

Checks, each in a child process so that one process's bindings cannot hide
another's:
  - NEEDED lists nothing but glibc's libraries (no libev), and no glibc
    symbol version newer than NVIDIA's library needs;
  - no STATIC_TLS flag and no initial-exec TLS relocation, so the library
    can be dlopen()ed late, as Python's ctypes does;
  - loaded late by ctypes, cudart calls answer and a thread-mode loop and a
    foreign loop run without libev ever being mapped;
  - cudaev_loop_new_ev with CUDAEV_LIBEV naming a missing file returns
    CUDAEV_ERROR_NO_LIBEV with the loader's reason, and the runtime and the
    other loop modes are unaffected;
  - with libev loaded privately by the application (RTLD_LOCAL), the ev
    backend binds to that copy (RTLD_NOLOAD) and its loop delivers a
    promise's continuation.
"""
import os
import re
import subprocess
import sys

GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
         "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def error_base():
    """CUDAEV_ERROR_BASE as include/cudaev.h defines it (one source for the number)."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                          "cudaev.h")
    with open(header) as f:
        m = re.search(r"^#define CUDAEV_ERROR_BASE\s+(\w+)", f.read(), re.M)
    return int(m.group(1), 0)


NO_LIBEV = error_base() + 3  # CUDAEV_ERROR_NO_LIBEV

failures = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(name)


def readelf(*args):
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


# Child-side programs: run with `python3 -c`, the library path in argv[1].
PRELUDE = r"""
import ctypes, sys
def mapped(name):
    return any(name in line for line in open('/proc/self/maps'))
lib = ctypes.CDLL(sys.argv[1])
lib.cudaev_error_name.restype = ctypes.c_char_p
lib.cudaev_error_string.restype = ctypes.c_char_p
"""

NO_EV = PRELUDE + r"""
assert not mapped('libev'), 'libev mapped before any call'
n = ctypes.c_int(-1)
r = lib.cudaGetDeviceCount(ctypes.byref(n))
assert r != 0 or n.value >= 0, r
loop = ctypes.c_void_p()
assert lib.cudaev_loop_new_thread(ctypes.byref(loop)) == 0
lib.cudaev_loop_destroy(loop)
assert lib.cudaev_loop_new_foreign(ctypes.byref(loop)) == 0
assert lib.cudaev_loop_fd(loop) >= 0
lib.cudaev_loop_destroy(loop)
assert lib.cudaev_loop_default()
assert not mapped('libev'), 'libev mapped by thread or foreign loops'
print('ran without libev')
"""

MISSING_EV = PRELUDE + r"""
loop = ctypes.c_void_p()
r = lib.cudaev_loop_new_ev(ctypes.c_void_p(1), ctypes.byref(loop))
assert r == %d, r
assert lib.cudaev_error_name(r) == b'CUDAEV_ERROR_NO_LIBEV', lib.cudaev_error_name(r)
why = lib.cudaev_error_string(r)
assert b'/nonexistent/libev.so.4' in why, why
assert loop.value is None
assert lib.cudaev_loop_new_thread(ctypes.byref(loop)) == 0
lib.cudaev_loop_destroy(loop)
n = ctypes.c_int(-1)
lib.cudaGetDeviceCount(ctypes.byref(n))
print(why.decode())
""" % NO_LIBEV

PRIVATE_EV = PRELUDE + r"""
import os
ev = ctypes.CDLL('libev.so.4', mode=os.RTLD_LOCAL)
ev.ev_loop_new.restype = ctypes.c_void_p
evl = ctypes.c_void_p(ev.ev_loop_new(0))
assert evl.value
loop = ctypes.c_void_p()
assert lib.cudaev_loop_new_ev(evl, ctypes.byref(loop)) == 0
CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
seen = []
def done(f, status, user):
    seen.append(status)
cb = CB(done)
f = ctypes.c_void_p()
assert lib.cudaev_promise_new(loop, ctypes.byref(f)) == 0
assert lib.cudaev_future_then(f, cb, None) == 0
assert lib.cudaev_promise_set(f, 0) == 0
for _ in range(100):
    if seen: break
    ev.ev_run(evl, 2)   # EVRUN_ONCE
assert seen == [0], seen
lib.cudaev_future_release(f)
lib.cudaev_loop_destroy(loop)
print('continuation ran inside the application\'s private libev')
"""


def child(name, code, env=None):
    e = dict(os.environ)
    e.pop("CUDAEV_LIBEV", None)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", code, LIB], capture_output=True, text=True,
                       env=e, timeout=60)
    check(name, r.returncode == 0, (r.stdout + r.stderr).strip()[-800:])


LIB = os.path.abspath(sys.argv[1])
needed = {l.split("[")[1].rstrip("]") for l in readelf("-dW", LIB).splitlines() if "(NEEDED)" in l}
check("NEEDED within glibc " + " ".join(sorted(needed)), needed <= GLIBC, str(needed - GLIBC))
dyn = readelf("-dW", LIB)
check("no STATIC_TLS flag", "STATIC_TLS" not in dyn)


def glibc_max(path):
    t = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    vs = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", t)}
    return max(vs) if vs else (0,)


nvidia = os.environ.get("CUDAEV_NVIDIA_CUDART", "")
floor = glibc_max(nvidia) if os.path.exists(nvidia) else (2, 17)
ours = glibc_max(LIB)
check(f"glibc versions needed up to {ours}, NVIDIA's {floor}", ours <= floor)
relocs = readelf("-rW", LIB)
check("no initial-exec TLS relocation", "TPOFF" not in relocs,
      "\n".join(l for l in relocs.splitlines() if "TPOFF" in l)[:400])
child("ctypes loads it late; thread and foreign loops run without libev", NO_EV)
child("CUDAEV_LIBEV=/nonexistent: CUDAEV_ERROR_NO_LIBEV with the reason", MISSING_EV,
      {"CUDAEV_LIBEV": "/nonexistent/libev.so.4"})
child("application's private libev (RTLD_LOCAL) drives an ev loop", PRIVATE_EV)
sys.exit(1 if failures else 0)
