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
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_report import num, plot  # noqa: E402

COLUMNS = [("server", "server"), ("connections", "conns"), ("rps", "req/s"),
           ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"),
           ("errors", "errors"), ("cpu_cores", "CPU (cores)"), ("threads", "threads")]


NUMERIC = ("rps", "p50_ms", "p99_ms", "p999_ms", "max_ms", "errors", "cpu_cores", "threads",
           "requests", "server_p99_ms", "socket_p99_ms", "send_p99_ms", "machine_cores",
           "steal_cores")
# The C servers' own p99s (bench/prom_hist.py), shown when a row has one,
# beside the whole machine's busy and stolen cores, round by round: a bad
# round's wrk p99 then reads against where the server saw its time go and
# what else the machine did.
OWN = [("server", "server"), ("connections", "conns"), ("p99_ms", "wrk's p99"),
       ("server_p99_ms", "handling (head read to answer queued)"),
       ("socket_p99_ms", "in the socket before read"), ("send_p99_ms", "answer ready to written"),
       ("machine_cores", "machine busy (cores)"), ("steal_cores", "stolen by the host (cores)")]


def merge_rounds(rows):
    """One row per (server, connections): each number the median over the
    rounds, with rps, p50 and p99 kept per round (`rps_all`, `p50_all`, `p99_ms_all`) for the
    spread; the servers' first-seen order is kept."""
    groups = {}
    for r in rows:
        groups.setdefault((r["server"], int(r["connections"])), []).append(r)
    out = []
    for (server, c), rs in groups.items():
        m = {"server": server, "connections": str(c), "rounds": len(rs)}
        for k in NUMERIC:
            per_round = [num(r.get(k, "")) for r in rs]
            vals = [v for v in per_round if v is not None]
            m[k] = f"{statistics.median(vals):g}" if vals else ""
            if k in ("rps", "p50_ms", "p99_ms"):
                m[k + "_all"] = vals
            if k in (o for o, _ in OWN):
                m[k + "_rounds"] = per_round
        out.append(m)
    return out


def verdicts(rows, ours="py-cudaev"):
    by = {(r["server"], int(r["connections"])): r for r in rows}
    points = sorted({int(r["connections"]) for r in rows})
    out = []

    def get(server, c, col):
        r = by.get((server, c))
        return num(r[col]) if r else None

    for c in (1, 16):
        a, e = get(ours, c, "p50_ms"), get("py-executor", c, "p50_ms")
        if a is None or e is None:
            out.append((False, f"p50 at {c} connections: not measured"))
        else:
            out.append((a <= 0.8 * e, f"{ours}: p50 at {c} connections: cudaev {a:.3f} ms, executor "
                                      f"{e:.3f} ms: {a / e:.2f}x (target <= 0.8x)"))
    for c in points:
        a, p = get(ours, c, "cpu_cores"), get("py-poll", c, "cpu_cores")
        if a is None or p is None:
            out.append((False, f"CPU at {c} connections: not measured"))
        else:
            ratio = a / p if p else float("inf")
            out.append((ratio <= 0.5, f"{ours}: CPU at {c} connections: cudaev {a:.2f} cores, poll "
                                      f"{p:.2f}: {ratio:.2f}x (target <= 0.5x)"))
        a = get(ours, c, "rps")
        for twin in ("py-executor", "py-poll"):
            t = get(twin, c, "rps")
            if a is None or t is None:
                out.append((False, f"req/s at {c} connections vs {twin}: not measured"))
            else:
                out.append((a >= t, f"{ours}: req/s at {c} connections: cudaev {a:.0f}, {twin} {t:.0f}: "
                                    f"{a / t if t else float('inf'):.2f}x (target >= 1x)"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("outdir")
    ap.add_argument("--header")
    a = ap.parse_args()
    rows = merge_rounds(list(csv.DictReader(open(a.csv))))
    nrounds = max((r["rounds"] for r in rows), default=1)
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
            spread = r.get(k + "_all") or []
            if len(spread) > 1:
                fmt = "{:,.0f}" if k == "rps" else "{:.3f}"
                v += f" ({fmt.format(min(spread))}..{fmt.format(max(spread))})"
            cells.append(v or "-")
        lines.append("| " + " | ".join(cells) + " |")
    if nrounds > 1:
        lines += ["", f"Medians over {nrounds} rounds (min..max for req/s, p50 and p99); "
                  "each round ran every server once, orders rotated."]
    own = [r for r in rows if r.get("server_p99_ms")]
    if own:
        lines += ["", "The C servers' own p99, ms (their histograms' bucket bounds; the socket "
                  "waits with --socket-timing in SERVE_ARGS), and the whole machine's busy and "
                  "stolen cores (/proc/stat) during each point, round by round (r1 / r2 / ...):",
                  "", "| " + " | ".join(h for _, h in OWN) + " |", "|" + "---|" * len(OWN)]
        for r in own:
            cells = []
            for k, _ in OWN:
                rounds = r.get(k + "_rounds")
                if rounds is None:
                    cells.append(r.get(k) or "-")
                else:
                    cells.append(" / ".join("-" if v is None else f"{v:g}" for v in rounds))
            lines.append("| " + " | ".join(cells) + " |")
    vs = verdicts(rows)
    ok = all(v for v, _ in vs)
    lines += ["", "Targets (py-cudaev against its twins):", ""]
    lines += [f"- {'PASS' if v else 'FAIL'}: {t}" for v, t in vs]
    for variant, flag in (("py-cudaev-nospin", "--cudaev-spin-us 0"),
                          ("py-cudaev-words", "--cudaev-markers auto")):
        if any(r["server"] == variant for r in rows):
            lines += ["", f"The same bars for {variant} ({flag}), for comparison:", ""]
            lines += [f"- {'PASS' if v else 'FAIL'}: {t}" for v, t in verdicts(rows, variant)]
    lines += ["", f"All targets: {'PASS' if ok else 'FAIL'}",
              "", plot(rows, os.path.join(a.outdir, "serve_py.png"),
                   "the Python service (--wait cudaev) beside its twins and the C services")]
    md = os.path.join(a.outdir, "serve_py.md")
    open(md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
