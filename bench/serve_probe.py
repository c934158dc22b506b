#!/usr/bin/env python3
"""Where a service's time goes under wrk: one load point, looked at from inside.

Starts a server, loads it with wrk (bench/serve.lua, POST /v1/infer) and
reports, for the measured window:

- requests/s, p50 / p99 (wrk), the server's CPU in cores (every process
  under it, from /proc) and its CPU per request;
- each thread's CPU and where it was when sampled (running, or the system
  call it waited in: epoll_pwait, futex, poll, ...), every 0.5 ms;
- the service's own counters, summed over every worker (each worker's
  /metrics is scraped over new connections until every index in
  ``infer_workers`` has answered): rows per batch, a batch's time on the GPU,
  a request's time inside the service, and the cudaev loop's counters.

It is how bench/RESULTS.md found the word markers' cost on an H200 (four
workers at 16 connections); run it for a question serve_py.sh's table
cannot answer.

  python3 bench/serve_probe.py [--connections 16] [--seconds 5] [--json FILE] \\
      -- python3 examples/python_service/server.py --workers 4 --port 0 --port-file PORTFILE

PORTFILE in the command is replaced with a file the server writes its port
to (both services take --port-file). Environment: WRK (default: wrk on PATH,
else .device/wrk/wrk). Exit status: 0 measured, 2 could not (the reason on
stderr).
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prom_hist import parse  # noqa: E402 (sums each metric over the workers)

HERE = os.path.dirname(os.path.abspath(__file__))
SYSCALLS = {"7": "poll", "232": "epoll_wait", "281": "epoll_pwait", "441": "epoll_pwait2",
            "202": "futex", "16": "ioctl", "0": "read", "1": "write", "44": "sendto",
            "45": "recvfrom", "46": "sendmsg", "47": "recvmsg", "20": "writev", "24": "sched_yield",
            "230": "clock_nanosleep", "286": "timerfd_settime", "-1": "kernel"}
COUNTERS = ("infer_batch_rows_total", "infer_batch_size_count", "infer_gpu_seconds_total",
            "infer_request_duration_seconds_sum", "infer_request_duration_seconds_count",
            "process_cpu_seconds_total")


def die(msg):
    print(f"serve_probe: {msg}", file=sys.stderr)
    sys.exit(2)


class Server:
    """The server under test and every process under it."""

    def __init__(self, cmd, log):
        self.dir = tempfile.mkdtemp(prefix="serve_probe-")
        self.portfile = os.path.join(self.dir, "port")
        cmd = [c.replace("PORTFILE", self.portfile) for c in cmd]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                die(f"the server exited {self.proc.returncode} before it served")
            try:
                with open(self.portfile) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        self.stop()
        die("the server did not write its port within 120 s")

    def tasks(self):
        """(pid, tid) of every thread of the server's process tree."""
        out, todo = [], [self.proc.pid]
        while todo:
            p = todo.pop()
            try:
                tids = os.listdir(f"/proc/{p}/task")
            except OSError:
                continue
            for t in tids:
                out.append((p, t))
                try:
                    with open(f"/proc/{p}/task/{t}/children") as f:
                        todo += [int(c) for c in f.read().split()]
                except OSError:
                    pass
        return out

    def cpu(self):
        """tid -> (name, CPU ticks, pid)."""
        r = {}
        for p, t in self.tasks():
            try:
                with open(f"/proc/{p}/task/{t}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            fields = s.rsplit(")", 1)[1].split()
            r[t] = (s[s.index("(") + 1:s.rindex(")")], int(fields[11]) + int(fields[12]), p)
        return r

    def metrics(self):
        """Every worker's /metrics, concatenated."""
        seen = {}
        for _ in range(400):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                            timeout=5) as r:
                    text = r.read().decode()
            except OSError as e:
                die(f"/metrics: {e}")
            idx = re.search(r"^infer_worker (\d+)$", text, re.M)
            n = re.search(r"^infer_workers (\d+)$", text, re.M)
            want = int(n.group(1)) if n else 1
            seen[idx.group(1) if idx else "0"] = text
            if len(seen) >= want:
                return "".join(seen.values()), len(seen)
        return "".join(seen.values()), len(seen)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wrk_run(wrk, port, conns, seconds):
    env = dict(os.environ, SERVE_INPUTS=os.environ.get("SERVE_INPUTS", "64"))
    p = subprocess.run([wrk, "-t", str(min(8, conns)), "-c", str(conns), "-d", f"{seconds}s",
                        "--timeout", "30s", "-s", os.path.join(HERE, "serve.lua"),
                        f"http://127.0.0.1:{port}/v1/infer"],
                       env=env, capture_output=True, text=True, check=False)
    m = re.search(r"SERVE (\{.*\})", p.stdout)
    if not m:
        die(f"wrk printed no SERVE line: {p.stdout[-400:]} {p.stderr[-400:]}")
    return json.loads(m.group(1))


def sample(server, stop, samples):
    tasks = server.tasks()
    while not stop.is_set():
        for p, t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/syscall") as f:
                    first = f.read().split(maxsplit=1)
            except OSError:
                continue
            key = first[0] if first else "?"
            samples[(t, "running" if key == "running" else SYSCALLS.get(key, key))] += 1
        time.sleep(0.0005)


def main():
    if "--" not in sys.argv:
        die("usage: serve_probe.py [options] -- SERVER COMMAND (with PORTFILE)")
    cut = sys.argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=5, help="measured window (default 5)")
    ap.add_argument("--warmup", type=int, default=2, help="load before it (default 2)")
    ap.add_argument("--json", help="also write the numbers there")
    ap.add_argument("--log", default=os.devnull, help="the server's output (default: dropped)")
    a = ap.parse_args(sys.argv[1:cut])
    cmd = sys.argv[cut + 1:]
    wrk = os.environ.get("WRK") or shutil.which("wrk") or os.path.join(HERE, "..", ".device",
                                                                      "wrk", "wrk")
    if not os.access(wrk, os.X_OK):
        die("no wrk (Debian's wrk, or WRK=...)")
    with open(a.log, "w") as log:
        server = Server(cmd, log)
        try:
            if a.warmup > 0:
                wrk_run(wrk, server.port, a.connections, a.warmup)
            m0, _ = server.metrics()
            cpu0 = server.cpu()
            stop, samples = threading.Event(), collections.Counter()
            th = threading.Thread(target=sample, args=(server, stop, samples), daemon=True)
            th.start()
            t0 = time.monotonic()
            res = wrk_run(wrk, server.port, a.connections, a.seconds)
            elapsed = time.monotonic() - t0
            stop.set()
            th.join()
            cpu1 = server.cpu()
            m1, nworkers = server.metrics()
        finally:
            server.stop()
    hz = os.sysconf("SC_CLK_TCK")
    rps = res["requests"] / res["duration_us"] * 1e6
    threads = []
    for t, (name, ticks, pid) in cpu1.items():
        cores = (ticks - cpu0.get(t, (name, 0, pid))[1]) / hz / elapsed
        where = sorted(((n, k) for (tt, k), n in samples.items() if tt == t), reverse=True)
        total = sum(n for n, _ in where) or 1
        threads.append({"pid": pid, "tid": int(t), "name": name, "cores": round(cores, 3),
                        "where": {k: round(n / total, 3) for n, k in where[:6]}})
    threads.sort(key=lambda x: -x["cores"])
    cores = sum(x["cores"] for x in threads)
    c0, c1 = parse(m0), parse(m1)
    delta = {k: c1[k] - c0.get(k, 0) for k in c1
             if k in COUNTERS or k.startswith("cudaev_loop_") or k.startswith("infer_requests_total")}
    batches = delta.get("infer_batch_size_count", 0)
    derived = {}
    if batches:
        derived = {
            "rows_per_batch": delta["infer_batch_rows_total"] / batches,
            "gpu_us_per_batch": delta["infer_gpu_seconds_total"] / batches * 1e6,
            "in_service_us_per_request": delta["infer_request_duration_seconds_sum"]
            / max(1, delta["infer_request_duration_seconds_count"]) * 1e6}
    out = {"connections": a.connections, "seconds": round(elapsed, 3), "requests": res["requests"],
           "rps": round(rps, 1), "p50_us": res["p50_us"], "p99_us": res["p99_us"],
           "server_cores": round(cores, 3), "cpu_us_per_request": round(cores * 1e6 / rps, 1),
           "workers_scraped": nworkers, "threads": threads, "counters": delta,
           **{k: round(v, 2) for k, v in derived.items()}}
    print(f"{a.connections} connections, {elapsed:.1f} s: {rps:,.0f} requests/s, p50 "
          f"{res['p50_us']} us, p99 {res['p99_us']} us; server {cores:.2f} cores "
          f"({out['cpu_us_per_request']} us of CPU a request)")
    if derived:
        print(f"  {derived['rows_per_batch']:.2f} rows a batch, {derived['gpu_us_per_batch']:.0f} us "
              f"a batch on the device, {derived['in_service_us_per_request']:.0f} us a request "
              f"inside the service ({nworkers} worker(s) scraped)")
    for x in threads:
        if x["cores"] >= 0.005:
            where = ", ".join(f"{k} {v:.0%}" for k, v in x["where"].items())
            print(f"  {x['pid']}/{x['tid']} {x['name'][:15]:15s} {x['cores']:5.2f} cores: {where}")
    for k in sorted(delta):
        if k.startswith("cudaev_loop_"):
            print(f"  {k} {delta[k]:g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
