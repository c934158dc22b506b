#!/usr/bin/env python3
"""tests/gpu/run.sh lists skipped tests once per reason, not once per test.

A made-up build directory (meson-info with tests that exit 77 with and
without a "SKIP: why" line, one that passes) is run through run.sh; its
console must carry one SKIP line per (suite, reason) with the count, the
names for a small group, and the usual summary line.

usage: run_skips.py RUN_SH
"""
import json
import os
import subprocess
import sys
import tempfile

run_sh = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def sh(script, suite):
    return {"cmd": ["/bin/sh", "-c", script], "suite": ["cudaev:" + suite]}


with tempfile.TemporaryDirectory() as build:
    tests = {}
    for i in range(7):  # a big group: counted, names left out
        tests["nogpu%d" % i] = sh('echo "a transcript line"; echo "SKIP: no GPU here"; exit 77', "gpu")
    tests["probe"] = sh('echo "SKIP: no GPU here"; echo "SKIP: no EGL device"; exit 77', "gpu")
    tests["plain"] = sh('echo "first"; echo "libfoo missing"; exit 77', "gpu")
    tests["mute"] = sh("exit 77", "unit")
    tests["fine"] = sh("exit 0", "unit")
    intro = []
    for name, t in tests.items():
        intro.append(dict(t, name=name, env={}, protocol="exitcode", timeout=30, workdir=build))
    os.makedirs(os.path.join(build, "meson-info"))
    with open(os.path.join(build, "meson-info", "meson-info.json"), "w") as f:
        json.dump({"directories": {"source": "/nonexistent-src", "build": build}}, f)
    with open(os.path.join(build, "meson-info", "intro-tests.json"), "w") as f:
        json.dump(intro, f)
    p = subprocess.run(["bash", run_sh, "-b", build, "-o", os.path.join(build, "logs"), "unit", "gpu"],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    print(out)
    lines = out.splitlines()
    skip_lines = [l for l in lines if l.startswith("SKIP")]
    check(p.returncode == 0, "run.sh exit %d with no failure" % p.returncode)
    check(lines[-1] == "1 passed, 0 failed, 10 skipped", "summary: %r" % lines[-1])
    check("SKIP  7 gpu tests: no GPU here" in lines, "the group of 7, without names")
    check("SKIP  1 gpu test (probe): no EGL device" in lines, "the last SKIP line is the reason")
    check("SKIP  1 gpu test (plain): libfoo missing" in lines, "without SKIP: the last line")
    check("SKIP  1 unit test (mute): no reason given (exit 77, no output)" in lines, "no output")
    check(len(skip_lines) == 4, "one SKIP line per reason, got %d" % len(skip_lines))
    check(any("On a GPU machine" in l for l in lines), "the pointer to the GPU machine's instructions")
    check(os.path.exists(os.path.join(build, "logs", "nogpu3.log")), "each skipped test keeps its log")

for f in failures:
    print("FAIL: " + f)
print("%d checks failed" % len(failures) if failures else "ok: skips grouped by reason")
sys.exit(1 if failures else 0)
