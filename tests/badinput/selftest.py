#!/usr/bin/env python3
"""Tests the harness itself on mock.c, a stand-in libcudart.so.13 with a
device: live and destroyed objects of every kind are made, cases that make
objects do not run cold, and crashes, hangs and crashes left by an earlier
case of a batch are recorded as such.

    selftest.py HARNESS MOCK_LIBCUDART
"""
import os
import subprocess
import sys

harness, mock = sys.argv[1], os.path.abspath(sys.argv[2])
env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(mock),
           ASAN_OPTIONS="handle_segv=0:handle_sigbus=0:handle_abort=0:detect_leaks=0")


def run(*args):
    p = subprocess.run([harness, "-e", mock, "-t", "1", "-j", "2"] + list(args), env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"harness {args} failed ({p.returncode}): {p.stderr}")
    return p.stdout.splitlines()


failures = 0


def expect(lines, line):
    global failures
    if line not in lines:
        failures += 1
        print(f"not ok: missing '{line}'")


def absent(lines, prefix):
    global failures
    hits = [l for l in lines if l.startswith(prefix)]
    if hits:
        failures += 1
        print(f"not ok: unexpected {hits}")


out = run()
expect(out, "# device yes")
# Every kind is made live and destroyed: its own destroy function accepts
# the live one and refuses the destroyed one (the mock remembers both).
for fn, param in [("cudaStreamDestroy", "stream"), ("cudaEventDestroy", "event"),
                  ("cudaGraphDestroy", "graph"), ("cudaGraphDestroyNode", "node"),
                  ("cudaGraphExecDestroy", "graphExec"), ("cudaFreeArray", "array"),
                  ("cudaFreeMipmappedArray", "mipmappedArray"), ("cudaMemPoolDestroy", "memPool"),
                  ("cudaUserObjectRelease", "object"), ("cudaLibraryUnload", "library"),
                  ("cudaKernelSetAttributeForDevice", "kernel"),
                  ("cudaDestroyTextureObject", "texObject"),
                  ("cudaDestroySurfaceObject", "surfObject"),
                  ("cudaDeviceUnregisterAsyncNotification", "callback"),
                  ("cudaLogsUnregisterCallback", "callback")]:
    expect(out, f"{fn}|warm:base|cudaSuccess|ok")
    expect(out, f"{fn}|warm:{param}=destroyed|cudaErrorInvalidResourceHandle|ok")
    # With a device, a case that makes objects runs warm only.
    absent(out, f"{fn}|cold:base|")
    absent(out, f"{fn}|cold:{param}=destroyed|")
expect(out, "cudaStreamQuery|warm:stream=legacy|cudaSuccess|ok")
expect(out, "cudaStreamQuery|warm:stream=bogus|-|crash:SIGSEGV")
expect(out, "cudaStreamQuery|cold:stream=bogus|-|crash:SIGSEGV")
expect(out, "cudaStreamQuery|cold:stream=null|cudaSuccess|ok")
expect(out, "cudaEventQuery|warm:event=bogus|-|hang")
expect(out, "cudaStreamCreate|warm:base|NOSYM|ok")
# The cudaEventRecord cases break the mock for the rest of the process:
# cudaEventSynchronize, in the same batch, crashes there but not alone.
out = run("-f", "cudaEvent", "-b", "1000", "-m", "warm")
expect(out, "cudaEventSynchronize|warm:base|cudaSuccess|batchcrash:SIGABRT")
expect(out, "cudaEventQuery|warm:event=bogus|-|hang")
expect(out, "cudaEventElapsedTime|warm:base|NOSYM|ok")
absent(out, "cudaStream")
absent(out, "cudaEventQuery|cold:")
print(f"{'FAIL' if failures else 'PASS'}: {failures} failed checks")
sys.exit(1 if failures else 0)
