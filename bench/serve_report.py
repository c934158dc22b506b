#!/usr/bin/env python3
"""The report of bench/serve.sh: serve.md (the table and the target's
verdict) and serve.png (requests/s and p99 latency against connections, one
line per server), from serve.csv.

  serve_report.py serve.csv OUTDIR [--header LOG]

Target: at the largest connection count, the async service sustains at least
2x the blocking twin's requests/s on NVIDIA's runtime, at equal or lower
p99. Exit 0 when it holds, 1 when not (or not measured)."""
import argparse
import csv
import os
import sys

COLUMNS = [("server", "server"), ("connections", "conns"), ("rps", "req/s"),
           ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"),
           ("errors", "errors"), ("cpu_cores", "CPU (cores)"), ("threads", "threads"),
           ("gpu_ms_per_req", "GPU ms/req"), ("wall_ms_mean", "server ms/req (mean)"),
           ("batch_mean", "rows/batch"), ("server_p99_ms", "server p99 ms (≤)")]
# With the service's --socket-timing (SERVE_ARGS): its wait in the socket
# before a request is read, and after its answer is ready until written.
SOCKET_COLUMNS = [("socket_p99_ms", "socket wait p99 ms (≤)"),
                  ("send_p99_ms", "send wait p99 ms (≤)")]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def verdict(rows):
    by = {(r["server"], int(r["connections"])): r for r in rows}
    top = max((int(r["connections"]) for r in rows), default=0)
    a, t = by.get(("async", top)), by.get(("twin-nvidia", top))
    if not a or not t or num(a["rps"]) is None or num(t["rps"]) is None:
        return False, f"not measured: need async and twin-nvidia at {top} connections"
    ratio = num(a["rps"]) / num(t["rps"]) if num(t["rps"]) else float("inf")
    ok = ratio >= 2 and num(a["p99_ms"]) <= num(t["p99_ms"])
    return ok, (f"at {top} connections: async {num(a['rps']):.0f} req/s, p99 {num(a['p99_ms']):.2f} ms;"
                f" twin on NVIDIA's {num(t['rps']):.0f} req/s, p99 {num(t['p99_ms']):.2f} ms: "
                f"{ratio:.2f}x the throughput (target >= 2x at equal or lower p99): "
                f"{'PASS' if ok else 'FAIL'}")


def plot(rows, path, title="inference service (one loop thread) vs its thread-per-connection twin"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no matplotlib: no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for server in dict.fromkeys(r["server"] for r in rows):
        pts = sorted((int(r["connections"]), num(r["rps"]), num(r["p99_ms"]))
                     for r in rows if r["server"] == server and num(r["rps"]) is not None)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ax1.plot(xs, [p[1] for p in pts], marker="o", label=server)
        ax2.plot(xs, [p[2] for p in pts], marker="o", label=server)
    for ax, title, unit in ((ax1, "throughput", "requests/s"), (ax2, "p99 latency", "ms")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("connections")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax2.set_yscale("log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"plot: {path}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--header")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv)) if r.get("server")]
    ok, line = verdict(rows)
    md = ["# Inference service load test (bench/serve.sh)", ""]
    if a.header and os.path.exists(a.header):
        md += ["- " + l.rstrip() for l in open(a.header)
               if l.startswith(("serve:", "date:", "device:", "async:", "twin-", "floor:"))]
        md.append("")
    cols = COLUMNS + [c for c in SOCKET_COLUMNS if any(r.get(c[0]) for r in rows)]
    md.append("| " + " | ".join(h for _, h in cols) + " |")
    md.append("|" + "---|" * len(cols))
    for r in rows:
        md.append("| " + " | ".join(r.get(k, "") or "-" for k, _ in cols) + " |")
    md += ["", "GPU ms/req: device time of the batches (events around each) / rows;",
           "server ms/req: arrival to answer inside the server, from its /metrics;",
           "CPU: the server process's CPU seconds / wall seconds; threads: the most seen.", "",
           "**" + line + "**", ""]
    note = plot(rows, os.path.join(a.out, "serve.png"))
    md.append(note)
    open(os.path.join(a.out, "serve.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
