#!/usr/bin/env bash
# Runs test suites of a carried build directory on a GPU machine, without
# Meson: reads the build's meson-info/intro-tests.json, maps the paths it
# recorded to where the tree is now, runs each test of the chosen suites
# (TAP tests counted per subtest), keeps every log, prints a summary line
# "N passed, N failed, N skipped" and exits non-zero on any failure.
# Skipped tests (exit 77) are listed after the run, one line per reason
# ("SKIP  39 gpu tests: no NVIDIA GPU on this machine (no /dev/nvidia0)"):
# the reason is the test's last "SKIP: why" line, else its last line.
#
#   tests/gpu/run.sh [-b BUILD_DIR] [-o LOG_DIR] [-x TEST]... [SUITE...]   (default suite: gpu)
#
# -x TEST leaves that test out (tools/gpu-check.sh runs the programs that
# link libev apart, with the application's libev on their path).
#
# On the device machine:  . .device/env.sh && tests/gpu/run.sh -o $OUT/gpu gpu unit
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$here/build"
logs=""
exclude=""
while getopts "b:o:x:" opt; do
  case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    o) logs=$OPTARG ;;
    x) exclude="$exclude,$OPTARG" ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- gpu
logs=${logs:-$build/gpu-logs}
mkdir -p "$logs"
exec python3 - "$here" "$build" "$logs" "$exclude" "$@" <<'PY'
import json, os, re, subprocess, sys, time
src, build, logs, suites = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:]
excluded = set(filter(None, sys.argv[4].split(",")))
info = json.load(open(os.path.join(build, "meson-info", "meson-info.json")))
old_src, old_build = info["directories"]["source"], info["directories"]["build"]
def fix(s):
    return s.replace(old_build, build).replace(old_src, src) if isinstance(s, str) else s
tests = json.load(open(os.path.join(build, "meson-info", "intro-tests.json")))
passed = failed = skipped = 0
skips = {}  # (suite, reason) -> names of the tests skipped for it
def skip_reason(out):
    """A skipped test's reason: its last "SKIP: why" line, else its last line."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for l in reversed(lines):
        if l.startswith("SKIP:"):
            return l[5:].strip() or "no reason given"
    return lines[-1] if lines else "no reason given (exit 77, no output)"
t0 = time.time()
for t in tests:
    in_suites = [s.split(":")[-1] for s in t["suite"] if s.split(":")[-1] in suites]
    if not in_suites or t["name"] in excluded:
        continue
    env = dict(os.environ)
    env.setdefault("CUDAEV_TRANSCRIPTS", os.path.join(logs, "transcripts"))
    for k, v in (t.get("env") or {}).items():
        v = fix(v)
        env[k] = v + ":" + os.environ["LD_LIBRARY_PATH"] if k == "LD_LIBRARY_PATH" and os.environ.get("LD_LIBRARY_PATH") else v
    cmd = [fix(c) for c in t["cmd"]]
    # The build machine's interpreter path may not exist here.
    if not os.path.exists(cmd[0]) and os.path.basename(cmd[0]).startswith("python"):
        cmd[0] = "python3"
    name = t["name"]
    start = time.time()
    try:
        p = subprocess.run(cmd, cwd=t.get("workdir") or build, env=env, capture_output=True,
                           text=True, timeout=t.get("timeout") or 300)
        out, rc = p.stdout + p.stderr, p.returncode
    except OSError as e:
        out, rc = str(e), "oserror"
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    with open(os.path.join(logs, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + out)
    secs = time.time() - start
    if t.get("protocol") == "tap" and isinstance(rc, int):
        ok = len(re.findall(r"^ok\b", p.stdout, re.M))
        bad = len(re.findall(r"^not ok\b", p.stdout, re.M))
        sk = len(re.findall(r"^ok\b.*# SKIP", p.stdout, re.M | re.I))
        if bad == 0 and rc != 0:
            bad = 1
        passed += ok - sk; failed += bad; skipped += sk
        verdict = "FAIL" if bad else "ok"
        print(f"{verdict:5} {name:28} {ok - sk} passed, {bad} failed, {sk} skipped  ({secs:.1f}s)")
    elif rc == 0:
        passed += 1; print(f"ok    {name:28} ({secs:.1f}s)")
    elif rc == 77:
        # Printed once per reason after the run, not once per test.
        skipped += 1; skips.setdefault((in_suites[0], skip_reason(out)), []).append(name)
    else:
        failed += 1; print(f"FAIL  {name:28} exit {rc} ({secs:.1f}s); log: {name}.log")
        # The head says what ran, the tail why it failed (pytest's summary,
        # a crash's last words).
        lines = out.splitlines()
        if len(lines) > 40:
            lines = lines[:20] + [f"[... {len(lines) - 40} lines ...]"] + lines[-20:]
        for line in lines:
            print("      | " + line)
for (suite, reason), names in skips.items():
    n = len(names)
    which = f" ({', '.join(names)})" if n <= 6 else ""
    print(f"SKIP  {n} {suite} test{'s' if n > 1 else ''}{which}: {reason}")
if any(suite == "gpu" for suite, _ in skips):
    print("      (the gpu suite on a GPU machine: CONTRIBUTING.md, \"On a GPU machine\")")
print(f"suites {' '.join(suites)} in {time.time() - t0:.0f}s; logs in {logs}")
# One archive too, for transports that bring back few files. It is written
# beside the folder and then moved in: written inside, it changes the folder
# tar is reading (tar warns "file changed as we read it").
tmp = logs.rstrip("/") + ".tar.gz.tmp"
subprocess.run(["tar", "czf", tmp, "-C", logs, "--exclude", "logs.tar.gz", "."], check=False)
if os.path.exists(tmp):
    os.replace(tmp, os.path.join(logs, "logs.tar.gz"))
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
