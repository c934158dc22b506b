#!/usr/bin/env python3
"""The report of bench/serve_py.sh: serve_py.md (one table of all five
servers, and the targets' verdicts) and serve_py.png (serve_report.py's plot:
requests/s and p99 against connections), from serve_py.csv.

  serve_py_report.py serve_py.csv OUTDIR [--header LOG]

Targets (the Python service, py-cudaev, against its twins):
  - p50 at 1 and 16 connections <= 0.8x py-executor's
  - CPU (cores) <= 0.5x py-poll's at every point
  - requests/s >= py-executor's and py-poll's at every point
Exit 0 when all hold, 1 when one does not or was not measured."""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_report import num, plot  # noqa: E402

COLUMNS = [("server", "server"), ("connections", "conns"), ("rps", "req/s"),
           ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"),
           ("errors", "errors"), ("cpu_cores", "CPU (cores)"), ("threads", "threads")]


def verdicts(rows):
    by = {(r["server"], int(r["connections"])): r for r in rows}
    points = sorted({int(r["connections"]) for r in rows})
    out = []

    def get(server, c, col):
        r = by.get((server, c))
        return num(r[col]) if r else None

    for c in (1, 16):
        a, e = get("py-cudaev", c, "p50_ms"), get("py-executor", c, "p50_ms")
        if a is None or e is None:
            out.append((False, f"p50 at {c} connections: not measured"))
        else:
            out.append((a <= 0.8 * e, f"p50 at {c} connections: cudaev {a:.3f} ms, executor "
                                      f"{e:.3f} ms: {a / e:.2f}x (target <= 0.8x)"))
    for c in points:
        a, p = get("py-cudaev", c, "cpu_cores"), get("py-poll", c, "cpu_cores")
        if a is None or p is None:
            out.append((False, f"CPU at {c} connections: not measured"))
        else:
            ratio = a / p if p else float("inf")
            out.append((ratio <= 0.5, f"CPU at {c} connections: cudaev {a:.2f} cores, poll "
                                      f"{p:.2f}: {ratio:.2f}x (target <= 0.5x)"))
        a = get("py-cudaev", c, "rps")
        for twin in ("py-executor", "py-poll"):
            t = get(twin, c, "rps")
            if a is None or t is None:
                out.append((False, f"req/s at {c} connections vs {twin}: not measured"))
            else:
                out.append((a >= t, f"req/s at {c} connections: cudaev {a:.0f}, {twin} {t:.0f}: "
                                    f"{a / t if t else float('inf'):.2f}x (target >= 1x)"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("outdir")
    ap.add_argument("--header")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    lines = ["# The Python service and its twins beside the C services (bench/serve_py.sh)", ""]
    if a.header and os.path.exists(a.header):
        lines += ["```"] + [l.rstrip() for l in open(a.header)
                            if not l.startswith("  ")][:6] + ["```", ""]
    lines.append("| " + " | ".join(h for _, h in COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in rows:
        cells = []
        for k, _ in COLUMNS:
            v = r.get(k, "")
            if k == "rps" and num(v) is not None:
                v = f"{num(v):,.0f}"
            cells.append(v or "-")
        lines.append("| " + " | ".join(cells) + " |")
    vs = verdicts(rows)
    ok = all(v for v, _ in vs)
    lines += ["", "Targets (py-cudaev against its twins):", ""]
    lines += [f"- {'PASS' if v else 'FAIL'}: {t}" for v, t in vs]
    lines += ["", f"All targets: {'PASS' if ok else 'FAIL'}",
              "", plot(rows, os.path.join(a.outdir, "serve_py.png"),
                   "the Python service (--wait cudaev) beside its twins and the C services")]
    md = os.path.join(a.outdir, "serve_py.md")
    open(md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
