#!/usr/bin/env python3
"""Where a decode step's time goes, per --wait mode: the decode loop
(bench/decode_load.py, one round a start) with a tracer in the service
(decode_trace/sitecustomize.py) that times each step's wait against the
GPU's own completion of the step (bench's libwait_watch.so: a thread
spinning on the step's CUDA event).

For each mode and batch size it reports, over the steps after the first 20
of each start: how long after the wait's call the GPU finished; how long
after the GPU finished the engine resumed (the wait path's own cost, the
poller's included); the engine's time between waits and its parts (the
output read, the token writes, the step boundary, the next step's enqueue,
the rest: the event loop's turn); for cudaev, which reader call saw the
completion (the timerfd's hybrid wake, the eventfd of an armed host
function, or the wait's own call) and the loop's passes per step. A second
table gives the engine thread's counters over the same spans (the wait, the
time between waits, each part): instructions and instructions per cycle
where the machine's PMU counts them (to tell more work from a slower CPU),
the thread's CPU time against the wall time, and its context switches.

  python3 bench/decode_trace.py --watch .gpu/build/bench/libwait_watch.so \\
      --modes cudaev,poll --starts 2 --out trace

The watcher costs a core: compare modes with each other here, never with an
untraced run's CPU or tokens/s. Writes PREFIX.md and PREFIX.json.
"""
import argparse
import bisect
import collections
import glob
import json
import os
import statistics
import subprocess
import sys

from decode_load import pct  # the percentile the decode load test reports

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = os.path.join(os.path.dirname(HERE), "examples", "python_service")
PARTS = ("result", "_deliver", "_boundary", "enqueue")
WARMUP_STEPS = 20
SPANS = ("wait", "between") + PARTS


def span_counters(d, wall_ns, moved=None):
    """One span's counter deltas [instructions, cycles, cpu ns, voluntary and
    involuntary switches] as the numbers the table pools; instructions and
    cycles are None where the PMU did not count them (-1 at either end).
    ``moved``: whether the thread ended the span on another CPU (None:
    not known, as for the parts)."""
    counted = d[0] >= 0 and d[1] > 0
    return {"instr": d[0] if counted else None, "ipc": d[0] / d[1] if counted else None,
            "cpu": d[2] / wall_ns if wall_ns > 0 else None, "csw": d[3] + d[4],
            "moved": moved}


def _group(**more):
    """One batch size's samples (lists and counts, pooled across processes),
    with ``more`` keys of its own."""
    g = {"gpu_after_call": [], "resume_after_done": [], "between": [], "readers": [],
         "passes": [], "parts": {k: [] for k in PARTS + ("other",)},
         "via": collections.Counter(), "counters": {k: [] for k in SPANS}}
    g.update(more)
    return g


def _delta(a, b):
    """The counters' deltas from a to b (the first five: the sixth is a CPU
    number) and whether the CPU changed (None when not recorded)."""
    if a is None or b is None:
        return None, None
    d = [(-1 if (x < 0 or y < 0) else y - x) for x, y in zip(a[:5], b[:5])]
    return d, (a[5] != b[5] if len(a) > 5 and len(b) > 5 else None)


def analyze_one(trace):
    """Per batch size, the numbers of one process's trace (dict as written
    by the tracer): lists of microseconds and counts, pooled later."""
    steps = trace["steps"]
    parts = sorted(trace.get("parts", []), key=lambda p: p[1])
    readers = sorted(trace.get("readers", []), key=lambda r: r[1])
    p_at, r_at = [p[1] for p in parts], [r[1] for r in readers]
    seen = collections.Counter()
    out = {}
    for i, s in enumerate(steps):
        n = s["n"]
        seen[n] += 1
        if seen[n] <= WARMUP_STEPS:
            continue
        if n not in out:
            out[n] = _group(cpus=collections.Counter())
        g = out[n]
        d, moved = _delta(s.get("c_call"), s.get("c_resume"))
        if d is not None:
            g["counters"]["wait"].append(span_counters(d, s["resume"] - s["call"], moved))
            if len(s["c_resume"]) > 5:
                g["cpus"][s["c_resume"][5]] += 1
        if s["gpu_done"]:
            g["gpu_after_call"].append((s["gpu_done"] - s["call"]) / 1e3)
            g["resume_after_done"].append((s["resume"] - s["gpu_done"]) / 1e3)
        if "loop" in s:
            g["passes"].append(s["loop"]["passes"])
            # Reader calls during the wait; the first that ended after the
            # GPU finished is the one that saw it (none: the wait's own call).
            j = bisect.bisect_left(r_at, s["call"])
            calls = []
            while j < len(readers) and readers[j][1] < s["resume"]:
                calls.append(readers[j])
                j += 1
            g["readers"].append(len(calls))
            if s["gpu_done"]:
                first = next((c for c in calls if c[2] >= s["gpu_done"]), None)
                g["via"]["in the call" if first is None else first[0]] += 1
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if nxt is None or nxt["n"] != n:
            continue
        gap = (nxt["call"] - s["resume"]) / 1e3
        g["between"].append(gap)
        d, moved = _delta(s.get("c_resume"), nxt.get("c_call"))
        if d is not None:
            g["counters"]["between"].append(span_counters(d, nxt["call"] - s["resume"], moved))
        j = bisect.bisect_left(p_at, s["resume"])
        acc = dict.fromkeys(PARTS, 0.0)
        while j < len(parts) and parts[j][1] < nxt["call"]:
            acc[parts[j][0]] += (parts[j][2] - parts[j][1]) / 1e3
            if len(parts[j]) >= 8:
                g["counters"][parts[j][0]].append(
                    span_counters(parts[j][3:8], parts[j][2] - parts[j][1]))
            j += 1
        for k in PARTS:
            g["parts"][k].append(acc[k])
        g["parts"]["other"].append(gap - sum(acc.values()))
    return out


def pool(results):
    """Merges analyze_one results (one per process) into one."""
    out = {}
    for r in results:
        for n, g in r.items():
            if n not in out:
                out[n] = _group(between_p50_each=[], cpus_each=[])
            o = out[n]
            if g.get("cpus"):
                # how many CPUs the engine resumed on in this process, and
                # the share of its steps on the one it used most
                c = g["cpus"]
                o["cpus_each"].append((len(c), max(c.values()) / sum(c.values())))
            for k, v in g["counters"].items():
                o["counters"][k] += v
            for k in ("gpu_after_call", "resume_after_done", "between", "readers", "passes"):
                o[k] += g[k]
            for k, v in g["parts"].items():
                o["parts"][k] += v
            o["via"].update(g["via"])
            if g["between"]:
                o["between_p50_each"].append(pct(g["between"], 50))
    return out


def summary(pooled):
    """The table's numbers per batch size."""
    rows = {}
    for n, g in sorted(pooled.items()):
        if not g["resume_after_done"]:
            continue
        r = {"steps": len(g["resume_after_done"]),
             "gpu_after_call_p50": pct(g["gpu_after_call"], 50)}
        for q in (50, 90, 99):
            r[f"resume_p{q}"] = pct(g["resume_after_done"], q)
        r["resume_mean"] = statistics.mean(g["resume_after_done"])
        r["between_p50"] = pct(g["between"], 50)
        r["between_mean"] = statistics.mean(g["between"]) if g["between"] else float("nan")
        r["between_p50_each"] = g["between_p50_each"]
        r["parts_p50"] = {k: pct(v, 50) for k, v in g["parts"].items()}
        r["counters"] = {k: counters_p50(v) for k, v in g["counters"].items() if v}
        r["cpus_each"] = g["cpus_each"]
        if g["passes"]:
            total = sum(g["via"].values())
            r["via"] = {k: v / total for k, v in sorted(g["via"].items())} if total else {}
            r["readers_per_step"] = statistics.mean(g["readers"])
            r["passes_per_step"] = statistics.mean(g["passes"])
        rows[n] = r
    return rows


def counters_p50(spans):
    """p50 of each counter over a span's samples (None where none counted),
    and the mean context switches per span."""
    out = {}
    for k in ("instr", "ipc", "cpu"):
        v = [x[k] for x in spans if x[k] is not None]
        out[k] = pct(v, 50) if v else None
    out["csw"] = statistics.mean(x["csw"] for x in spans)
    moved = [x["moved"] for x in spans if x["moved"] is not None]
    out["moved"] = sum(moved) / len(moved) if moved else None
    return out


def load(prefix):
    traces = []
    for path in sorted(glob.glob(glob.escape(prefix) + ".*")):
        with open(path) as f:
            t = json.load(f)
        if t.get("steps"):
            traces.append(t)
    return traces


def report(table):
    lines = ["| --wait | batch | steps | GPU done after the call, p50 us | resumed after the GPU "
             "finished, p50 / p90 / p99 / mean us | between waits p50 / mean us (p50 of each "
             "start) | of which result / _deliver / _boundary / enqueue / rest, p50 us | "
             "cudaev: completion seen by; reader calls, passes a step |",
             "|---|---|---|---|---|---|---|---|"]
    for mode, rows in table.items():
        for n, r in rows.items():
            p = r["parts_p50"]
            each = ", ".join(f"{x:.0f}" for x in r["between_p50_each"])
            via = ""
            if "via" in r:
                via = (", ".join(f"{k} {100 * v:.0f} %" for k, v in r["via"].items())
                       + f"; {r['readers_per_step']:.2f}, {r['passes_per_step']:.2f}")
            lines.append(
                f"| {mode} | {n} | {r['steps']} | {r['gpu_after_call_p50']:.0f} | "
                f"{r['resume_p50']:.1f} / {r['resume_p90']:.1f} / {r['resume_p99']:.1f} / "
                f"{r['resume_mean']:.1f} | {r['between_p50']:.0f} / {r['between_mean']:.0f} "
                f"({each}) | {p['result']:.0f} / {p['_deliver']:.0f} / {p['_boundary']:.0f} / "
                f"{p['enqueue']:.0f} / {p['other']:.0f} | {via} |")
    lines += ["", "The engine thread's counters, p50 over the steps: instructions (thousands) / "
              "instructions per cycle / CPU time per wall time; context switches per span "
              "(mean); for the wait and the time between waits, the share of spans that "
              "ended on another CPU than they began. \"-\": not counted (no PMU). Last "
              "column: per process, the CPUs the engine resumed on and the share of the "
              "steps on the one it used most.", "",
              "| --wait | batch | " + " | ".join(SPANS) + " | CPUs |",
              "|---|---|" + "---|" * (len(SPANS) + 1)]
    for mode, rows in table.items():
        for n, r in rows.items():
            cells = []
            for k in SPANS:
                c = r.get("counters", {}).get(k)
                if c is None:
                    cells.append("")
                    continue
                instr = "-" if c["instr"] is None else f"{c['instr'] / 1e3:.0f} k"
                ipc = "-" if c["ipc"] is None else f"{c['ipc']:.2f}"
                cpu = "-" if c["cpu"] is None else f"{c['cpu']:.2f}"
                moved = "" if c.get("moved") is None else f"; moved {100 * c['moved']:.0f} %"
                cells.append(f"{instr} / {ipc} / {cpu}; {c['csw']:.2f}{moved}")
            cells.append(", ".join(f"{k} ({100 * share:.0f} %)"
                                   for k, share in r.get("cpus_each", [])))
            lines.append(f"| {mode} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--watch", required=True, help="bench's libwait_watch.so")
    ap.add_argument("--modes", default="cudaev,poll")
    ap.add_argument("--starts", type=int, default=2, help="service starts per mode (default 2)")
    ap.add_argument("--streams", default="1,16,64")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--size", default="small", choices=("small", "large"),
                    help="the model (decode_load.py --size)")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--out", default="decode-trace", help="output prefix")
    a = ap.parse_args(argv)
    if not os.path.isfile(a.watch):
        ap.error(f"--watch: no file {a.watch} (bench's libwait_watch.so, built with the tree)")
    modes = [m for m in a.modes.split(",") if m]
    env = dict(os.environ, DECODE_TRACE_WATCH=os.path.abspath(a.watch),
               DECODE_TRACE_SERVICE=SERVICE,
               PYTHONPATH=os.pathsep.join(
                   [os.path.join(HERE, "decode_trace")]
                   + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    prefixes = {m: [] for m in modes}
    for start in range(a.starts):
        k = start % len(modes)
        for mode in modes[k:] + modes[:k]:
            prefix = os.path.abspath(f"{a.out}-{mode}-{start}")
            cmd = [sys.executable, os.path.join(HERE, "decode_load.py"), "--modes", mode,
                   "--streams", a.streams, "--repeats", "1", "--tokens", str(a.tokens),
                   "--idle-s", "0.5", "--no-check", "--size", a.size, "--out", prefix + "-load"]
            cmd += [f"--server-arg={s}" for s in a.server_arg]
            r = subprocess.run(cmd, env=dict(env, DECODE_TRACE=prefix + ".trace"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(f"decode_trace: --wait {mode}, start {start + 1}: exit {r.returncode}",
                  flush=True)
            if r.returncode != 0:
                print(r.stdout[-2000:])
            prefixes[mode].append(prefix + ".trace")
    table = {}
    for mode in modes:
        traces = [t for p in prefixes[mode] for t in load(p)]
        table[mode] = summary(pool([analyze_one(t) for t in traces]))
    md = report(table)
    with open(a.out + ".md", "w") as f:
        f.write(md)
    with open(a.out + ".json", "w") as f:
        json.dump({str(m): {str(n): r for n, r in rows.items()} for m, rows in table.items()},
                  f, indent=1)
    print(md)
    return 0 if all(table.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
