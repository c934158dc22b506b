#!/usr/bin/env python3
"""Statistics, targets, table and plots for bench/run.sh (python3 stdlib only).

    benchstat.py analyze --runs RUNS.tsv --targets TARGETS --out OUTDIR [--header FILE]

RUNS.tsv has one line per program run, tab-separated:
    program runtime round rc seconds stdout_path stderr_path expected_libcudart
where runtime is "nvidia" or "cudaev". A run counts only if its stderr's
"cudart <path>" lines all name the expected library (the same file).

Writes under OUTDIR: table.md (header + table + runs), samples.csv.gz (every
sample: runtime,round,program,metric,value), summary.json (every number in the
table), and PNG plots (matplotlib if importable, else gnuplot if on PATH, else a plain
pure-python PNG without text).
Prints the table. Exit status: 0 when every target passed, 1 when one failed
or could not be measured, 2 on a usage error.

Statistics (bench/README.md explains them): percentiles interpolate linearly
between order statistics; a metric's p50/p99 pool the samples of all rounds;
ratio = cudaev p50 / NVIDIA p50; spread = min..max of the per-round ratios
(each round's cudaev p50 / the same round's NVIDIA p50); verdict "same" when
1 lies within the spread or |ratio - 1| <= max - min.
"""

import argparse
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

RUNTIMES = ("nvidia", "cudaev")
LABEL = {"nvidia": "NVIDIA", "cudaev": "cudaev"}
OPS = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}
SHOW_OP = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}


# ---------------------------------------------------------------- statistics

def percentile(xs, q):
    """q-th percentile (0..100) of xs, linear between order statistics."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def stat(xs, name):
    if not xs:
        return None
    if name in ("median", "p50"):
        return percentile(xs, 50)
    if name == "mean":
        return sum(xs) / len(xs)
    if name == "min":
        return min(xs)
    if name == "max":
        return max(xs)
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", name)
    if m:
        return percentile(xs, float(m.group(1)))
    raise ValueError("unknown statistic " + name)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def verdict(r, spread, higher):
    """'same' when the difference from 1 is within the spread of the rounds."""
    if r is None:
        return ""
    if spread is not None:
        lo, hi = spread
        if lo <= 1.0 <= hi or abs(r - 1.0) <= hi - lo:
            return "same"
    elif r == 1.0:
        return "same"
    better = r > 1.0 if higher else r < 1.0
    return "faster" if better else "slower"


# ---------------------------------------------------------------- targets file

class Target:
    def __init__(self, line_no, text, terms, statname, op, value, runtime):
        self.line_no = line_no
        self.text = text
        self.terms = terms  # [(metric, runtime or None)], 1 or 2 (A/B)
        self.stat = statname
        self.op = op
        self.value = value
        self.runtime = runtime

    @property
    def is_ratio(self):
        return self.stat == "ratio"

    def lhs(self):
        return "/".join(m + ("@" + r if r else "") for m, r in self.terms)

    def describe(self):
        v = "{:,.0f}".format(self.value) if abs(self.value) >= 1e4 else "%g" % self.value
        if self.is_ratio:
            return "%s %s×" % (SHOW_OP[self.op], v)
        who = "" if self.runtime == "cudaev" else " (%s)" % LABEL[self.runtime]
        return "%s %s %s%s" % (self.stat, SHOW_OP[self.op], v, who)


class Targets:
    def __init__(self):
        self.targets = []
        self.higher = set()
        self.plots = []  # (name, [metrics])


def parse_targets(text):
    """Parses bench/targets.txt (format documented at its top)."""
    t = Targets()
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        f = line.split()
        if f[0] == "higher":
            if len(f) < 2:
                raise ValueError("line %d: 'higher' needs metric names" % no)
            t.higher.update(f[1:])
            continue
        if f[0] == "plot":
            if len(f) < 3:
                raise ValueError("line %d: 'plot' needs a name and metrics" % no)
            if not re.fullmatch(r"[A-Za-z0-9_-]+", f[1]):
                raise ValueError("line %d: bad plot name %r" % (no, f[1]))
            t.plots.append((f[1], f[2:]))
            continue
        if len(f) not in (4, 5):
            raise ValueError("line %d: expected '<metric>[/<metric>] <stat> <op> <value> [runtime]': %r" % (no, raw))
        lhs, statname, op, value = f[:4]
        runtime = f[4] if len(f) == 5 else None
        if op not in OPS:
            raise ValueError("line %d: bad operator %r" % (no, op))
        try:
            value = float(value)
        except ValueError:
            raise ValueError("line %d: bad value %r" % (no, value))
        terms = []
        for term in lhs.split("/"):
            m, _, r = term.partition("@")
            if not re.fullmatch(r"[a-z0-9_]+", m) or (r and r not in RUNTIMES):
                raise ValueError("line %d: bad metric term %r" % (no, term))
            terms.append((m, r or None))
        if len(terms) > 2:
            raise ValueError("line %d: at most one '/' in %r" % (no, lhs))
        if statname == "ratio":
            if len(terms) != 1 or terms[0][1] or runtime:
                raise ValueError("line %d: 'ratio' compares one metric across runtimes; no '/', '@' or runtime" % no)
        else:
            try:
                stat([1.0], statname)
            except ValueError:
                raise ValueError("line %d: bad statistic %r" % (no, statname))
            runtime = runtime or "cudaev"
            if runtime not in RUNTIMES:
                raise ValueError("line %d: runtime must be nvidia or cudaev, not %r" % (no, runtime))
        t.targets.append(Target(no, raw.strip(), terms, statname, op, value, runtime))
    for tg in t.targets:
        if tg.is_ratio:
            m = tg.terms[0][0]
            if (tg.op in (">=", ">")) != (m in t.higher):
                raise ValueError("line %d: %s: use >= exactly for 'higher' metrics" % (tg.line_no, m))
    return t


# ---------------------------------------------------------------- program output

class Run:
    def __init__(self, program, runtime, rnd, rc, seconds, out, err, lib):
        self.program = program
        self.runtime = runtime
        self.round = rnd
        self.rc = rc
        self.seconds = seconds
        self.out = out
        self.err = err
        self.lib = lib
        self.error = None  # why its samples are (partly) missing
        self.samples = {}  # metric -> [values]
        self.units = {}
        self.benches = {}  # bench -> seconds


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_cudart(err_text, expected):
    """None when every 'cudart <path>' line names `expected`; else why not."""
    paths = [l[len("cudart "):].strip() for l in err_text.splitlines() if l.startswith("cudart ")]
    if not paths:
        return "no 'cudart <path>' line on stderr"
    for p in paths:
        if p == "none" or p.startswith("none ") or not _same_file(p, expected):
            return "mapped %s, not %s" % (p, expected)
    return None


def _last_error_line(err_text):
    lines = [l for l in err_text.splitlines() if l.strip() and not l.startswith("cudart ")]
    msgs = [l for l in lines if l.startswith("bench:") and " done in " not in l]
    pick = msgs[-1] if msgs else (lines[-1] if lines else "")
    return pick[:200]


def parse_run(run, out_text, err_text):
    """Fills run.samples/units/benches/error from the program's output."""
    bad = check_cudart(err_text, run.lib)
    if bad:
        run.error = "wrong libcudart: " + bad
        return
    current = None
    pending = {}  # samples of the bench in progress
    loose = {}  # samples outside any bench block
    done = {}
    for line in out_text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "bench" and len(f) == 2:
            current = f[1]
            pending = {}
        elif f[0] == "end" and len(f) >= 2 and f[1] == current:
            for m, v in pending.items():
                done.setdefault(m, []).extend(v)
            try:
                run.benches[current] = float(f[2]) if len(f) > 2 else None
            except ValueError:
                run.benches[current] = None
            current = None
            pending = {}
        elif f[0] == "unit" and len(f) >= 3:
            run.units[f[1]] = " ".join(f[2:])
        elif f[0] == "sample" and len(f) == 3:
            try:
                v = float(f[2])
            except ValueError:
                continue
            if not math.isfinite(v):
                continue
            (pending if current else loose).setdefault(f[1], []).append(v)
    if run.rc == 0 and current is None:
        for m, v in loose.items():
            done.setdefault(m, []).extend(v)
    run.samples = done
    if run.rc != 0:
        why = {124: "timed out", 137: "killed"}.get(run.rc, "exit %d" % run.rc)
        where = (" in " + current) if current else ""
        run.error = "%s%s: %s" % (why, where, _last_error_line(err_text))
    elif current is not None:
        run.error = "bench %s never ended" % current


def read_runs(path):
    runs = []
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            p = line.split("\t")
            if len(p) != 8:
                raise ValueError("%s:%d: expected 8 tab-separated fields" % (path, no))
            prog, rt, rnd, rc, secs, out, err, lib = p
            if rt not in RUNTIMES:
                raise ValueError("%s:%d: bad runtime %r" % (path, no, rt))
            if rc.startswith("skip"):  # run.sh ran out of its time budget, or the program hung before
                r = Run(prog, rt, int(rnd), -1, 0.0, out, err, lib)
                r.error = "skipped: " + ("timed out in an earlier round" if rc == "skip-timeout"
                                         else "time budget spent")
            else:
                r = Run(prog, rt, int(rnd), int(rc), float(secs), out, err, lib)
                parse_run(r, _read(out), _read(err))
            runs.append(r)
    return runs


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# ---------------------------------------------------------------- analysis

class Data:
    """Samples indexed by metric, runtime and round."""

    def __init__(self, runs):
        self.runs = runs
        self.samples = {}  # (metric, runtime) -> {round: [values]}
        self.units = {}
        self.program_of = {}  # metric -> program
        self.order = []
        self.rounds = sorted({r.round for r in runs})
        for r in runs:
            for m, vs in r.samples.items():
                self.samples.setdefault((m, r.runtime), {}).setdefault(r.round, []).extend(vs)
                if m not in self.program_of:
                    self.program_of[m] = r.program
                    self.order.append(m)
            for m, u in r.units.items():
                self.units.setdefault(m, u)

    def pooled(self, metric, runtime):
        out = []
        for vs in self.samples.get((metric, runtime), {}).values():
            out.extend(vs)
        return out

    def by_round(self, metric, runtime):
        return self.samples.get((metric, runtime), {})

    def errors(self, metric, runtime=None):
        """Error strings of the runs that should have measured `metric`.

        A metric no run produced may belong to any program that never
        produced a sample at all, so those programs' errors are reported."""
        prog = self.program_of.get(metric)
        silent = {r.program for r in self.runs} - set(self.program_of.values())
        out = []
        for r in self.runs:
            if not r.error or (runtime is not None and r.runtime != runtime):
                continue
            if (r.program == prog and metric not in r.samples) or (prog is None and r.program in silent):
                out.append("%s %s round %d: %s" % (r.program, LABEL[r.runtime], r.round, r.error))
        return out


def metric_summary(data, metric, higher):
    s = {"metric": metric, "unit": data.units.get(metric, ""), "higher_is_better": higher,
         "program": data.program_of.get(metric)}
    for rt in RUNTIMES:
        xs = data.pooled(metric, rt)
        s[rt] = {"n": len(xs), "p50": stat(xs, "p50"), "p99": stat(xs, "p99"),
                 "rounds": {str(k): stat(v, "p50") for k, v in sorted(data.by_round(metric, rt).items())},
                 "errors": data.errors(metric, rt)}
    s["ratio"] = ratio(s["cudaev"]["p50"], s["nvidia"]["p50"])
    per_round = []
    for k in data.rounds:
        a = s["cudaev"]["rounds"].get(str(k))
        b = s["nvidia"]["rounds"].get(str(k))
        rr = ratio(a, b)
        if rr is not None:
            per_round.append(rr)
    s["round_ratios"] = per_round
    s["spread"] = [min(per_round), max(per_round)] if per_round else None
    s["verdict"] = verdict(s["ratio"], s["spread"], higher)
    return s


def evaluate(target, data):
    """Returns a dict: value, spread, result, note."""
    r = {"target": target.text, "line": target.line_no, "lhs": target.lhs(), "stat": target.stat,
         "op": target.op, "threshold": target.value, "runtime": target.runtime}
    errs = []
    if target.is_ratio:
        m = target.terms[0][0]
        a = stat(data.pooled(m, "cudaev"), "p50")
        b = stat(data.pooled(m, "nvidia"), "p50")
        value = ratio(a, b)
        rounds = []
        for k in data.rounds:
            rr = ratio(stat(data.by_round(m, "cudaev").get(k, []), "p50"),
                       stat(data.by_round(m, "nvidia").get(k, []), "p50"))
            if rr is not None:
                rounds.append(rr)
        errs = data.errors(m)
    else:
        def of(term, xs_round=None):
            m, rt = term
            rt = rt or target.runtime
            xs = data.pooled(m, rt) if xs_round is None else data.by_round(m, rt).get(xs_round, [])
            return stat(xs, target.stat)

        vals = [of(t) for t in target.terms]
        value = vals[0] if len(vals) == 1 else ratio(vals[0], vals[1])
        rounds = []
        for k in data.rounds:
            vr = [of(t, k) for t in target.terms]
            v = vr[0] if len(vr) == 1 else ratio(vr[0], vr[1])
            if v is not None:
                rounds.append(v)
        for m, rt in target.terms:
            errs += data.errors(m, rt or target.runtime)
    r["value"] = value
    r["round_values"] = rounds
    r["spread"] = [min(rounds), max(rounds)] if rounds else None
    r["errors"] = errs
    ok = OPS[target.op]
    if value is None:
        r["result"] = "ERROR" if errs else "MISSING"
    else:
        passed = ok(value, target.value)
        noisy = bool(rounds) and any(ok(v, target.value) != passed for v in rounds)
        r["result"] = ("PASS" if passed else "FAIL") + (" (noisy)" if noisy else "")
        if errs:
            r["result"] = "ERROR"
    return r


# ---------------------------------------------------------------- formatting

def fmt(v):
    if v is None:
        return "—"
    a = abs(v)
    if a >= 1e5:
        return "{:,.0f}".format(v)
    if a >= 100:
        return "%.1f" % v
    if a >= 10:
        return "%.2f" % v
    return "%.3f" % v


def fmt_ratio(v):
    return "—" if v is None else "%.3f" % v


def cell_rt(s, rt):
    d = s[rt]
    if d["n"] == 0:
        return "error" if d["errors"] else "—"
    txt = "%s / %s" % (fmt(d["p50"]), fmt(d["p99"]))
    if d["errors"]:
        txt += " (%d failed run%s)" % (len(d["errors"]), "s" if len(d["errors"]) > 1 else "")
    return txt


def cell_ratio(value, spread, verd=""):
    if value is None:
        return "—"
    txt = fmt_ratio(value)
    if spread is not None:
        txt += " (%s–%s)" % (fmt_ratio(spread[0]), fmt_ratio(spread[1]))
    if verd:
        txt += " " + verd
    return txt


def build_table(data, targets):
    """Returns (markdown lines, summary dict, overall ok)."""
    metric_order = []
    for t in targets.targets:
        for m, _ in t.terms:
            if m not in metric_order:
                metric_order.append(m)
    for m in data.order:
        if m not in metric_order:
            metric_order.append(m)
    metric_targets = {}
    derived = []
    for t in targets.targets:
        if len(t.terms) == 1 and not t.terms[0][1]:
            metric_targets.setdefault(t.terms[0][0], []).append(t)
        else:
            derived.append(t)

    lines = ["| metric | unit | NVIDIA p50 / p99 | cudaev p50 / p99 | ratio (spread) | target | pass/fail |",
             "|---|---|---|---|---|---|---|"]
    summary = {"metrics": [], "targets": []}
    all_ok = True
    for m in metric_order:
        s = metric_summary(data, m, m in targets.higher)
        summary["metrics"].append(s)
        tdesc, tres = [], []
        for t in metric_targets.get(m, []):
            e = evaluate(t, data)
            summary["targets"].append(e)
            all_ok &= e["result"].startswith("PASS")
            tdesc.append(t.describe())
            res = e["result"]
            if not t.is_ratio and e["value"] is not None:
                res += " (%s)" % fmt(e["value"])
            tres.append(res)
        unit = (s["unit"] + (" ↑" if s["higher_is_better"] else "")).strip()
        if s["nvidia"]["n"] == 0 and s["cudaev"]["n"] == 0 and not s["nvidia"]["errors"] and not s["cudaev"]["errors"]:
            rt_cells = ["not measured", "not measured"]
        else:
            rt_cells = [cell_rt(s, "nvidia"), cell_rt(s, "cudaev")]
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            m, unit or "—", rt_cells[0], rt_cells[1], cell_ratio(s["ratio"], s["spread"], s["verdict"]),
            "; ".join(tdesc) or "—", "; ".join(tres) or "—"))
    for t in derived:
        e = evaluate(t, data)
        summary["targets"].append(e)
        all_ok &= e["result"].startswith("PASS")
        cells = {rt: "—" for rt in RUNTIMES}
        cells[t.runtime] = fmt_ratio(e["value"]) if len(t.terms) == 2 else fmt(e["value"])
        lines.append("| %s (%s of %s) | %s | %s | %s | %s | %s | %s |" % (
            t.lhs(), t.stat, LABEL[t.runtime], "ratio" if len(t.terms) == 2 else data.units.get(t.terms[0][0], "—"),
            cells["nvidia"], cells["cudaev"], cell_ratio(e["value"], e["spread"]) if len(t.terms) == 2 else "—",
            t.describe(), e["result"]))
    return lines, summary, all_ok


def runs_section(runs):
    lines = ["| program | runtime | round | exit | seconds | status |", "|---|---|---|---|---|---|"]
    for r in runs:
        lines.append("| %s | %s | %d | %d | %.1f | %s |" % (
            r.program, LABEL[r.runtime], r.round, r.rc, r.seconds, (r.error or "ok").replace("|", "/")))
    return lines


def bench_durations(runs):
    """Per benchmark: the longest duration seen (for budgeting)."""
    d = {}
    for r in runs:
        for b, s in r.benches.items():
            if s is not None:
                d[b] = max(d.get(b, 0.0), s)
    return d


# ---------------------------------------------------------------- plots

def _cdf(xs):
    s = sorted(xs)
    n = len(s)
    if n > 2000:  # thin to ~2000 points, keeping both ends
        step = n / 2000.0
        idx = sorted({int(i * step) for i in range(2000)} | {n - 1})
        return [s[i] for i in idx], [(i + 1) / n for i in idx]
    return s, [(i + 1) / n for i in range(n)]


RT_COLOR = {"nvidia": "#5c9e00", "cudaev": "#1f5fbf"}
PALETTE = ["#1f5fbf", "#d95f02", "#7570b3", "#e7298a", "#5c9e00", "#a6761d", "#666666", "#1b9e77"]


def _clip(series):
    """x range that keeps the bulk: [min, p99.9] over all series."""
    allx = [x for s in series for x in s[1]]
    lo = min(allx)
    hi = percentile(allx, 99.9)
    if hi <= lo:
        hi = max(allx)
    if hi <= lo:
        hi = lo + 1
    return lo, hi


def plan_plots(data, targets):
    """[(file, title, [(panel title, xlabel, [(label, xs, color, dashed)])])].

    cdf.png: one panel per metric, NVIDIA and cudaev in their colours;
    one more file per 'plot' statement of the targets file: its metrics in
    one panel, a colour per metric, NVIDIA dashed and cudaev solid."""
    plots = []
    panels = []
    for m in data.order:
        ser = [(LABEL[rt], data.pooled(m, rt), RT_COLOR[rt], False) for rt in RUNTIMES if data.pooled(m, rt)]
        if ser:
            panels.append((m, data.units.get(m, ""), ser))
    if panels:
        plots.append(("cdf.png", "Distribution per metric, NVIDIA libcudart vs cudaev (CDF, x clipped at p99.9)",
                      panels))
    for name, metrics in targets.plots:
        ser = []
        unit = ""
        for i, m in enumerate(metrics):
            for rt in RUNTIMES:
                xs = data.pooled(m, rt)
                if xs:
                    ser.append(("%s (%s)" % (m, LABEL[rt]), xs, PALETTE[i % len(PALETTE)], rt == "nvidia"))
                    unit = unit or data.units.get(m, "")
        if ser:
            plots.append((name + ".png", "%s: CDF, NVIDIA dashed, cudaev solid" % name, [(name, unit, ser)]))
    return plots


def _layout(n):
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    if n == 1:
        return 1, 1, 900, 560
    return rows, cols, 400 * cols, 290 * rows + 30


def plot_matplotlib(plots, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    for fname, title, panels in plots:
        rows, cols, w, h = _layout(len(panels))
        fig, axes = plt.subplots(rows, cols, figsize=(w / 80.0, h / 80.0), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.axis("off")
        for ax, (ptitle, unit, series) in zip(axes.flat, panels):
            lo, hi = _clip(series)
            for label, xs, color, dashed in series:
                x, y = _cdf(xs)
                ax.step(x, y, where="post", color=color, linestyle="--" if dashed else "-",
                        label="%s (n=%d)" % (label, len(xs)))
            ax.set_xlim(lo, hi)
            if lo > 0 and hi / lo > 20:
                ax.set_xscale("log")
            if len(panels) > 1:
                ax.set_title(ptitle, fontsize=9)
            ax.set_xlabel(unit, fontsize=8)
            ax.set_ylabel("fraction <= x", fontsize=8)
            ax.set_ylim(0, 1)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
        fig.suptitle(title)
        fig.tight_layout()
        path = os.path.join(outdir, fname)
        fig.savefig(path, dpi=80)
        plt.close(fig)
        made.append(path)
    return made


def _gp_str(text):
    return "'" + text.replace("'", "") + "'"


def plot_gnuplot(plots, outdir, gnuplot):
    made = []
    tmp = tempfile.mkdtemp(prefix="benchplot.")
    try:
        for fname, title, panels in plots:
            rows, cols, w, h = _layout(len(panels))
            path = os.path.join(outdir, fname)
            script = ["set terminal pngcairo noenhanced size %d,%d font ',8'" % (w, h),
                      "set output %s" % _gp_str(path),
                      "set multiplot layout %d,%d title %s" % (rows, cols, _gp_str(title)),
                      "set key bottom right", "set grid", "set ylabel 'fraction <= x'", "set yrange [0:1]"]
            for pi, (ptitle, unit, series) in enumerate(panels):
                lo, hi = _clip(series)
                script.append("set title %s" % _gp_str(ptitle if len(panels) > 1 else ""))
                script.append("set xlabel %s" % _gp_str(unit))
                script.append("set xrange [%r:%r]" % (lo, hi))
                script.append("set logscale x" if lo > 0 and hi / lo > 20 else "unset logscale x")
                parts = []
                for si, (label, xs, color, dashed) in enumerate(series):
                    dat = os.path.join(tmp, "p%d_%d.dat" % (pi, si))
                    x, y = _cdf(xs)
                    with open(dat, "w") as f:
                        f.writelines("%r %r\n" % (a, b) for a, b in zip(x, y))
                    parts.append("%s using 1:2 with steps lw 1.5 lc rgb '%s' dt %d title %s" % (
                        _gp_str(dat), color, 2 if dashed else 1, _gp_str("%s (n=%d)" % (label, len(xs)))))
                script.append("plot " + ", ".join(parts))
            script.append("unset multiplot")
            sp = os.path.join(tmp, "plot.gp")
            with open(sp, "w") as f:
                f.write("\n".join(script) + "\n")
            res = subprocess.run([gnuplot, sp], capture_output=True, text=True)
            if res.returncode != 0 or not os.path.exists(path):
                raise RuntimeError("gnuplot failed: " + res.stderr.strip()[:300])
            made.append(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return made


def _png(path, w, h, rows):
    """Writes 8-bit RGB rows (bytearrays of 3*w) as a PNG: zlib + struct."""
    import struct
    import zlib

    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def plot_plain(plots, outdir):
    """Last resort without matplotlib or gnuplot: pure-python PNGs with no
    text. Panels in the order of the table, left to right; y from 0 to 1,
    x linear from the panel's min to its p99.9; colours as in the others."""
    made = []
    for fname, _title, panels in plots:
        rows_n, cols, w, h = _layout(len(panels))
        img = [bytearray(b"\xff" * (3 * w)) for _ in range(h)]

        def put(x, y, rgb):
            if 0 <= x < w and 0 <= y < h:
                img[y][3 * x:3 * x + 3] = rgb

        ph, pw = (h - 30) // rows_n, w // cols
        for i, (_pt, _unit, series) in enumerate(panels):
            x0, y0 = (i % cols) * pw + 30, 30 + (i // cols) * ph + 10
            x1, y1 = x0 + pw - 45, y0 + ph - 35
            for k in range(5):  # frame and quarter lines
                yy = y1 - (y1 - y0) * k // 4
                for x in range(x0, x1 + 1, 1 if k in (0, 4) else 3):
                    put(x, yy, b"\x99\x99\x99")
            for yy in range(y0, y1 + 1):
                put(x0, yy, b"\x99\x99\x99")
                put(x1, yy, b"\x99\x99\x99")
            lo, hi = _clip(series)
            for _label, xs, color, dashed in series:
                rgb = bytes(int(color[j:j + 2], 16) for j in (1, 3, 5))
                px, py = _cdf(xs)
                prev = None
                for n, (a, b) in enumerate(zip(px, py)):
                    if a > hi:
                        break
                    cx = x0 + int((a - lo) / (hi - lo) * (x1 - x0))
                    cy = y1 - int(b * (y1 - y0))
                    if prev is not None:
                        (qx, qy) = prev
                        for t in range(max(abs(cx - qx), abs(cy - qy)) + 1):
                            steps = max(abs(cx - qx), abs(cy - qy)) or 1
                            xx, yy = qx + (cx - qx) * t // steps, qy + (cy - qy) * t // steps
                            if not dashed or (xx + yy) // 6 % 2 == 0:
                                put(xx, yy, rgb)
                                put(xx, yy + 1, rgb)
                    prev = (cx, cy)
        path = os.path.join(outdir, fname)
        _png(path, w, h, img)
        made.append(path)
    return made


def make_plots(data, targets, outdir, backend="auto"):
    """Returns (paths, note)."""
    if backend == "none":
        return [], "plots disabled"
    plots = plan_plots(data, targets)
    if not plots:
        return [], "no samples to plot"
    errors = []
    if backend in ("auto", "matplotlib"):
        try:
            return plot_matplotlib(plots, outdir), "matplotlib"
        except Exception as e:  # ImportError or a plotting failure: try the next backend
            errors.append("matplotlib: %s" % e)
    if backend in ("auto", "gnuplot"):
        gp = shutil.which("gnuplot")
        if gp:
            try:
                return plot_gnuplot(plots, outdir, gp), "gnuplot"
            except Exception as e:
                errors.append(str(e))
        else:
            errors.append("gnuplot not found")
    if backend in ("auto", "plain"):
        try:
            return plot_plain(plots, outdir), "plain PNG without text (%s): panels in table order, NVIDIA green, " \
                "cudaev blue, NVIDIA dashed in the named plots" % ("; ".join(errors) or "asked for")
        except Exception as e:
            errors.append("plain: %s" % e)
    return [], "no plots (" + "; ".join(errors) + ")"


# ---------------------------------------------------------------- main

def write_samples(runs, path):
    with gzip.open(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["runtime", "round", "program", "metric", "value"])
        for r in runs:
            for m, vs in r.samples.items():
                for v in vs:
                    w.writerow([r.runtime, r.round, r.program, m, "%.6g" % v])


def analyze(runs_path, targets_path, outdir, header_path=None, plots="auto"):
    with open(targets_path) as f:
        targets = parse_targets(f.read())
    runs = read_runs(runs_path)
    data = Data(runs)
    os.makedirs(outdir, exist_ok=True)
    table, summary, ok = build_table(data, targets)
    header = _read(header_path).rstrip("\n").splitlines() if header_path else []
    paths, plot_note = make_plots(data, targets, outdir, plots)
    durations = bench_durations(runs)
    doc = io.StringIO()
    for l in header:
        doc.write(l + "\n")
    if header:
        doc.write("\n")
    doc.write("\n".join(table) + "\n\n")
    doc.write("p50 / p99 pool the samples of all rounds; ratio = cudaev p50 / NVIDIA p50, (min–max of the "
              "per-round ratios), 'same' when the difference is within that spread; ↑ = higher is better; "
              "(noisy) = some round's value falls on the other side of the target.\n\n")
    doc.write("Plots: %s (%s)\n\n" % (", ".join(os.path.basename(p) for p in paths) or "none", plot_note))
    doc.write("Runs:\n\n" + "\n".join(runs_section(runs)) + "\n\n")
    doc.write("Longest time per benchmark (s): " +
              ", ".join("%s %.2f" % (b, s) for b, s in sorted(durations.items(), key=lambda x: -x[1])) + "\n")
    with open(os.path.join(outdir, "table.md"), "w") as f:
        f.write(doc.getvalue())
    write_samples(runs, os.path.join(outdir, "samples.csv.gz"))
    summary["ok"] = ok
    summary["plots"] = [os.path.basename(p) for p in paths]
    summary["runs"] = [{"program": r.program, "runtime": r.runtime, "round": r.round, "rc": r.rc,
                        "seconds": r.seconds, "error": r.error} for r in runs]
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("\n".join(table))
    print()
    print("Plots: %s (%s)" % (", ".join(paths) or "none", plot_note))
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("analyze")
    a.add_argument("--runs", required=True)
    a.add_argument("--targets", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--header")
    a.add_argument("--plots", default="auto", choices=["auto", "matplotlib", "gnuplot", "plain", "none"])
    c = sub.add_parser("check-targets")
    c.add_argument("targets")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "check-targets":
            with open(args.targets) as f:
                t = parse_targets(f.read())
            print("%d targets, %d higher-is-better metrics, %d plots" % (len(t.targets), len(t.higher), len(t.plots)))
            return 0
        return analyze(args.runs, args.targets, args.out, args.header, args.plots)
    except (ValueError, OSError) as e:
        print("benchstat: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
