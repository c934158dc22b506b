#!/usr/bin/env python3
"""Before and after, side by side: the Python service in several variants under
the same wrk load, rounds interleaved, one table of medians, spreads and
ratios to the first variant.

A variant is the service with something changed: a ``--wait`` mode, another
build of the cudaev package (its unpacked wheel first on PYTHONPATH), another
tree's server.py, any server flag. Each run is one ``bench/serve_probe.py``
load point (its JSON kept, so the threads' CPU and the loop's counters of
every run stay readable); the variants run in turn, in the opposite order
every other round, so that a machine that drifts during the call weighs on
each alike. The report is rewritten after every run: a call cut short by its
time limit still leaves the runs it finished.

  python3 bench/serve_ab.py --out DIR [--connections 1,16] [--rounds 2]
      [--seconds 4] [--server-args "--workers 4 --deadline-ms 30000"]
      NAME=SPEC [NAME=SPEC ...]

SPEC is a space-separated list of words:
  KEY=VALUE      the server's environment (PYTHONPATH=/tmp/old-wheel)
  wheel=PATH     a cudaev wheel, unpacked into a temporary folder put first
                 on the server's PYTHONPATH (tools/py-wheel.sh builds one)
  server=PATH    another server.py (an older tree's examples/python_service)
  anything else  an argument of server.py (--wait poll)
e.g.  new="--wait cudaev"  old="wheel=/tmp/old/cudaev.whl --wait cudaev"  poll="--wait poll"

Writes DIR/NAME-cC-rR.{json,txt,server.log} per run and DIR/ab.md (the table) and
DIR/ab.json. Environment: WRK, as for serve_probe.py. Exit status: 0 when
every run measured, 1 when some did not (their reasons in ab.md), 2 for bad
arguments.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "examples", "python_service", "server.py")
# What a row of the table shows, from each run's serve_probe JSON: a key, or
# a function of the run.
COLUMNS = (
    ("requests/s", "rps", "{:,.0f}"),
    ("p50 µs", "p50_us", "{:,.0f}"),
    ("p99 µs", "p99_us", "{:,.0f}"),
    ("CPU a request µs", "cpu_us_per_request", "{:,.0f}"),
    ("rows a batch", "rows_per_batch", "{:.2f}"),
    ("a batch on the GPU µs", "gpu_us_per_batch", "{:,.0f}"),
    ("loop fd wake-ups a request", lambda r: _per(r, "cudaev_loop_wakeups_total", "requests"),
     "{:.2f}"),
    ("armed wake-ups a GPU completion",
     lambda r: _per(r, "cudaev_loop_gpu_wakeups_armed_total", "cudaev_loop_gpu_completions_total"),
     "{:.2f}"),
)


def _per(run, key, over):
    counters = run.get("counters", {})
    den = run.get(over) if over in run else counters.get(over)
    if key not in counters or not den:
        return None
    return counters[key] / den


def parse_variant(text, default_server=SERVER):
    """'NAME=SPEC' -> dict(name, env, wheel, server, args); ValueError when
    malformed."""
    name, eq, spec = text.partition("=")
    if not eq or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"variant {text!r}: want NAME=SPEC, NAME of letters, digits, - and _")
    env, wheel, server, args = {}, None, default_server, []
    for word in shlex.split(spec):
        key, is_kv, value = word.partition("=")
        if word.startswith("-") or not is_kv:
            args.append(word)
        elif key == "server":
            server = value
        elif key == "wheel":
            wheel = value
        elif key.isidentifier():
            env[key] = value
        else:
            args.append(word)
    return {"name": name, "spec": spec.strip(), "env": env, "wheel": wheel, "server": server,
            "args": args}


def unpack_wheels(variants, into):
    """Unpacks each variant's wheel into a folder of ``into`` and puts it
    first on that variant's PYTHONPATH. ValueError for a wheel that cannot be
    read."""
    for v in variants:
        if v["wheel"] is None:
            continue
        site = os.path.join(into, v["name"])
        try:
            with zipfile.ZipFile(v["wheel"]) as z:
                z.extractall(site)
        except (OSError, zipfile.BadZipFile) as e:
            raise ValueError(f"variant {v['name']}: wheel {v['wheel']}: {e}") from None
        rest = v["env"].get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        v["env"]["PYTHONPATH"] = site + (os.pathsep + rest if rest else "")


def order(variants, rnd):
    """The variants' order in round ``rnd`` (0-based): as given, then reversed."""
    return list(variants) if rnd % 2 == 0 else list(reversed(variants))


def value(run, col):
    get = col[1]
    v = get(run) if callable(get) else run.get(get)
    return None if v is None else float(v)


def summarize(names, connections, runs):
    """runs: {(name, conns, round): run dict or {"error": why}}. Returns, per
    connections, per variant: n, and per column the median, min and max over
    its rounds; and the requests/s ratio to the first variant, median, min and
    max over the rounds that measured both."""
    out = {}
    base = names[0]
    for c in connections:
        rows = {}
        for name in names:
            mine = {r: x for (n, cc, r), x in runs.items() if n == name and cc == c}
            ok = {r: x for r, x in mine.items() if "error" not in x}
            row = {"n": len(ok), "errors": sorted(x["error"] for x in mine.values() if "error" in x)}
            for col in COLUMNS:
                vals = [v for v in (value(x, col) for x in ok.values()) if v is not None]
                if vals:
                    row[col[0]] = (statistics.median(vals), min(vals), max(vals))
            ratios = []
            for r, x in ok.items():
                b = runs.get((base, c, r))
                if b and "error" not in b and b.get("rps"):
                    ratios.append(x["rps"] / b["rps"])
            if ratios:
                row["ratio"] = (statistics.median(ratios), min(ratios), max(ratios))
            rows[name] = row
        out[c] = rows
    return out


def _cell(t, fmt):
    med, lo, hi = t
    if lo == hi:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(lo)}..{fmt.format(hi)})"


def report(connections, summary, variants):
    """The markdown table of ``summarize``'s result."""
    names = [v["name"] for v in variants]
    base = names[0]
    o = ["# Variants side by side (`bench/serve_ab.py`): medians over the rounds, "
         "(min..max) where they differ", ""]
    for v in variants:
        o.append(f"- `{v['name']}`: {v['spec'] or '(the server as it is)'}")
    o.append("")
    head = ["variant", "connections", "runs", f"requests/s / {base}'s"] + [c[0] for c in COLUMNS]
    o.append("| " + " | ".join(head) + " |")
    o.append("|" + "---|" * len(head))
    for c in connections:
        for name in names:
            row = summary[c][name]
            cells = [name, str(c), str(row["n"]),
                     _cell(row["ratio"], "{:.2f}×") if "ratio" in row else ""]
            cells += [_cell(row[col[0]], col[2]) if col[0] in row else "" for col in COLUMNS]
            o.append("| " + " | ".join(cells) + " |")
    errors = [(c, n, e) for c in connections for n in names for e in summary[c][n]["errors"]]
    if errors:
        o += ["", "Runs that did not measure:"]
        o += [f"- {n} at {c} connections: {e}" for c, n, e in errors]
    return "\n".join(o) + "\n"


def run_one(a, v, conns, rnd):
    stem = os.path.join(a.out, f"{v['name']}-c{conns}-r{rnd + 1}")
    cmd = [sys.executable, os.path.join(HERE, "serve_probe.py"), "--connections", str(conns),
           "--seconds", str(a.seconds), "--json", stem + ".json", "--log", stem + ".server.log",
           "--",
           sys.executable, v["server"], "--port", "0", "--port-file", "PORTFILE"]
    cmd += shlex.split(a.server_args) + v["args"]
    env = dict(os.environ, **v["env"])
    with open(stem + ".txt", "w") as log:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                timeout=a.run_timeout).returncode
        except subprocess.TimeoutExpired:
            return {"error": f"over --run-timeout {a.run_timeout} s"}
    if rc != 0:
        with open(stem + ".txt") as f:
            last = (f.read().strip().splitlines() or ["no output"])[-1]
        return {"error": f"serve_probe exit {rc}: {last}"}
    with open(stem + ".json") as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for every run and the report")
    ap.add_argument("--connections", default="1,16", help="load points (default 1,16)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    ap.add_argument("--seconds", type=int, default=4, help="measured window a run (default 4)")
    ap.add_argument("--server-args", default="--workers 4 --deadline-ms 30000",
                    help="server.py arguments every variant gets")
    ap.add_argument("--run-timeout", type=int, default=90, help="seconds a run may take")
    ap.add_argument("variants", nargs="+", metavar="NAME=SPEC")
    a = ap.parse_args(argv)
    try:
        variants = [parse_variant(t) for t in a.variants]
        connections = [int(c) for c in a.connections.split(",")]
    except ValueError as e:
        ap.error(str(e))
    names = [v["name"] for v in variants]
    if len(set(names)) != len(names):
        ap.error("two variants have one name")
    if a.rounds < 1 or any(c < 1 for c in connections):
        ap.error("--rounds and each of --connections must be at least 1")
    os.makedirs(a.out, exist_ok=True)
    sites = tempfile.TemporaryDirectory(prefix="serve_ab-")
    try:
        unpack_wheels(variants, sites.name)
    except ValueError as e:
        ap.error(str(e))
    runs = {}
    for rnd in range(a.rounds):
        for c in connections:
            for v in order(variants, rnd):
                t0 = time.monotonic()
                runs[(v["name"], c, rnd)] = res = run_one(a, v, c, rnd)
                what = res.get("error") or f"{res['rps']:,.0f} requests/s, p50 {res['p50_us']} us"
                print(f"round {rnd + 1}, {c} connections, {v['name']}: {what} "
                      f"({time.monotonic() - t0:.0f} s)", flush=True)
                summary = summarize(names, connections, runs)
                with open(os.path.join(a.out, "ab.md"), "w") as f:
                    f.write(report(connections, summary, variants))
                with open(os.path.join(a.out, "ab.json"), "w") as f:
                    json.dump({str(c): rows for c, rows in summary.items()}, f, indent=1)
    sites.cleanup()
    with open(os.path.join(a.out, "ab.md")) as f:
        sys.stdout.write(f.read())
    return 1 if any("error" in x for x in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
