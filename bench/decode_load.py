#!/usr/bin/env python3
"""Load test of the decode loop (POST /v1/generate of
examples/python_service/server.py), the three --wait modes in one run.

For each mode it starts the service (one worker), measures its CPU with no
request (idle), then for each concurrency (1, 16, 64 streams by default)
opens that many streams of --tokens tokens at once, --repeats times, and
records (with --starts N, each mode's service is started N times, the
modes' order rotated at each start: on a VM a service's speed differs from
one start to the next by more than the modes differ, so the spread must
include it): tokens/s (all tokens over the wall time of the round), time to
first token, the gaps between a stream's tokens (inter-token latency, p50
and p99 over every gap of the round), and the service's CPU (user + system
of the master and its workers, from /proc/PID/stat, over the round) in
cores. With --check (the default) every answer is checked against the model
run one request at a time on the same device as the service
(decode_model.reference_check: the served token must be the reference's
argmax up to a near tie).

Writes JSON (every round) and a markdown table (medians, with min..max over
the repeats as the spread) with the targets judged, and a plot when
matplotlib imports.

  python3 bench/decode_load.py                     # GPU: --model-device cuda
  python3 bench/decode_load.py --quick             # CPU smoke: numpy, short streams
  python3 bench/decode_load.py --server-arg=--cuda-device=1

Exit status: 0 when every answer checked, 1 when one did not or a mode
failed to start (the table says why); the targets are reported, not
enforced.
"""
import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = os.path.join(os.path.dirname(HERE), "examples", "python_service")
sys.path.insert(0, SERVICE)

MODES = ("cudaev", "executor", "poll")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="CPU smoke test: --model-device cpu, 1 and 4 streams of 16 tokens, "
                   "one repeat")
    p.add_argument("--modes", default=",".join(MODES), help="--wait modes (default all three)")
    p.add_argument("--streams", default="1,16,64", help="concurrencies (default 1,16,64)")
    p.add_argument("--tokens", type=int, default=256, help="tokens per stream (default 256)")
    p.add_argument("--prompt-len", type=int, default=8, help="prompt tokens (default 8)")
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds per concurrency and start (default 3)")
    p.add_argument("--starts", type=int, default=1,
                   help="service starts per mode, modes rotated (default 1)")
    p.add_argument("--idle-s", type=float, default=3.0, help="idle CPU window (default 3 s)")
    p.add_argument("--model-device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--size", default="small", choices=("small", "large"),
                   help="the model (server.py --decode-size): small, the default, or large "
                   "(a GPU step of a millisecond or more; made at each start in ~10 s)")
    p.add_argument("--server-arg", action="append", default=[],
                   help="one more argument for server.py (repeatable)")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="do not check the answers against the reference")
    p.add_argument("--out", default="decode-load", help="output prefix (.json, .md, .png)")
    a = p.parse_args(argv)
    if a.quick:
        a.model_device, a.tokens, a.repeats, a.idle_s = "cpu", 16, 1, 2.0
        a.starts = min(a.starts, 2)
        if a.streams == "1,16,64":
            a.streams = "1,4"
    a.modes = [m for m in a.modes.split(",") if m]
    a.streams = [int(n) for n in a.streams.split(",") if n]
    for m in a.modes:
        if m not in MODES:
            p.error(f"--modes: '{m}' is not one of {', '.join(MODES)}")
    if a.starts < 1 or a.repeats < 1:
        p.error("--starts and --repeats: at least 1")
    return a


def prompts(n, length):
    import numpy as np
    rng = np.random.default_rng(12345)
    return [[int(t) for t in rng.integers(0, 512, length)] for _ in range(n)]


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))]


class Service:
    def __init__(self, args, mode, max_batch):
        self.dir = tempfile.mkdtemp(prefix="decode-load-")
        port_file = os.path.join(self.dir, "port")
        cmd = [sys.executable, os.path.join(SERVICE, "server.py"), "--port", "0",
               "--port-file", port_file, "--wait", mode, "--model-device", args.model_device,
               "--decode-max-batch", str(max_batch), "--decode-drain-timeout", "5",
               "--decode-size", args.size, *args.server_arg]
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300  # the large model's weights take a while
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(self.output().strip().splitlines()[-1:] or ["no output"])
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{int(open(port_file).read())}"

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def cpu_s(self):
        pids = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except OSError:
                pass
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def one_stream(session, url, prompt, tokens, t_start):
    import aiohttp  # noqa: F401 (the session's module)
    times, toks, final = [], [], None
    async with session.post(url + "/v1/generate",
                            json={"prompt": prompt, "max_tokens": tokens}) as r:
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {(await r.text()).strip()}")
        async for line in r.content:
            now = time.perf_counter()
            obj = json.loads(line)
            if obj.get("done"):
                final = obj
                break
            times.append(now)
            toks.append(obj["token"])
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"ttft": times[0] - t_start if times else float("nan"), "gaps": gaps,
            "tokens": toks, "final": final}


async def round_(url, ps, tokens):
    import aiohttp
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as s:
        t0 = time.perf_counter()
        res = await asyncio.gather(*(one_stream(s, url, p, tokens, t0) for p in ps))
        wall = time.perf_counter() - t0
    return res, wall


def scrape(url):
    """The service's unlabelled metrics (/metrics) as {name: value}."""
    import urllib.request  # noqa: PLC0415

    from prom_hist import parse  # noqa: PLC0415

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return {k: v for k, v in parse(r.read().decode()).items() if "{" not in k}


LOOP_KEYS = ("cudaev_loop_passes_total", "cudaev_loop_wakeups_total",
             "cudaev_loop_gpu_wakeups_armed_total", "cudaev_loop_timers_fired_total",
             "cudaev_loop_spin_seconds_total")


def per_step(m0, m1):
    """Decode steps between two scrapes, and what cudaev's loop did per step."""
    steps = m1.get("decode_steps_total", 0) - m0.get("decode_steps_total", 0)
    out = {"steps": steps}
    if steps and all(k in m1 for k in LOOP_KEYS):
        for k in LOOP_KEYS:
            short = k[len("cudaev_loop_"):-len("_total")]
            out[short] = (m1[k] - m0[k]) / steps
    return out


def run_mode(args, mode, ps, answers):
    out = {"mode": mode, "rounds": []}
    try:
        svc = Service(args, mode, max(args.streams))
    except RuntimeError as e:
        out["error"] = f"did not start: {e}"
        return out
    try:
        asyncio.run(round_(svc.url, ps[:1], 4))  # warm-up: first-use costs off the clock
        time.sleep(0.5)
        c0, t0 = svc.cpu_s(), time.monotonic()
        time.sleep(args.idle_s)
        out["idle_cores"] = (svc.cpu_s() - c0) / (time.monotonic() - t0)
        for n in args.streams:
            for rep in range(args.repeats):
                m0 = scrape(svc.url)
                c0 = svc.cpu_s()
                res, wall = asyncio.run(round_(svc.url, ps[:n], args.tokens))
                cpu = svc.cpu_s() - c0
                steps = per_step(m0, scrape(svc.url))
                gaps = [g for r in res for g in r["gaps"]]
                total = sum(len(r["tokens"]) for r in res)
                out["rounds"].append({
                    "streams": n, "repeat": rep, "tokens": total, "wall_s": wall,
                    "tokens_per_s": total / wall,
                    "ttft_p50_ms": 1e3 * pct([r["ttft"] for r in res], 50),
                    "ttft_max_ms": 1e3 * max(r["ttft"] for r in res),
                    "itl_p50_ms": 1e3 * pct(gaps, 50), "itl_p99_ms": 1e3 * pct(gaps, 99),
                    "server_cores": cpu / wall, "per_step": steps,
                    "step_ms": 1e3 * wall / steps["steps"] if steps["steps"] else None})
                for i, r in enumerate(res):
                    if len(r["tokens"]) != args.tokens or not r["final"]:
                        out.setdefault("bad", []).append(f"stream {i}: {len(r['tokens'])} tokens, "
                                                         f"final {r['final']}")
                    answers.setdefault(i, set()).add(tuple(r["tokens"]))
    except Exception as e:  # a failed round: say which, keep the others' numbers
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        svc.stop()
        tail = svc.output().strip().splitlines()[-3:]
        if out.get("error"):
            out["error"] += " | server: " + " / ".join(tail)
    return out


def merge_starts(mode, runs):
    """One mode's result over its service starts: every round, the median
    idle CPU, and each start's error or bad stream."""
    out = {"mode": mode, "rounds": [rnd for r in runs for rnd in r["rounds"]],
           "starts": len(runs)}
    idle = [r["idle_cores"] for r in runs if r.get("idle_cores") is not None]
    if idle:
        out["idle_cores"] = statistics.median(idle)
        out["idle_cores_each"] = idle
    errors = [f"start {i + 1}: {r['error']}" for i, r in enumerate(runs) if r.get("error")]
    if errors:
        out["error"] = "; ".join(errors)
    bad = [b for r in runs for b in r.get("bad", [])]
    if bad:
        out["bad"] = bad
    return out


def check_answers(args, ps, answers):
    """Every distinct answer for each prompt, against the reference."""
    import decode_model
    dims = decode_model.SIZES[args.size]
    w = decode_model.make_weights(dims)
    if args.model_device == "cuda":
        import decode_torch
        ref = decode_torch.TorchModel(w, dims, max_batch=1, device="cuda")
    else:
        ref = decode_model.NumpyModel(w, dims, max_batch=1)
    bad, exact, total = [], 0, 0
    for i, seen in sorted(answers.items()):
        for toks in seen:
            ok, ex, msg = decode_model.reference_check(ref, ps[i], list(toks))
            exact += ex
            total += len(toks)
            if not ok:
                bad.append(f"prompt {i}: {msg}")
    return {"distinct_answers": sum(len(s) for s in answers.values()), "tokens": total,
            "exact": exact, "bad": bad}


def median_spread(rounds, key):
    xs = [r[key] for r in rounds]
    return statistics.median(xs), min(xs), max(xs)


def report(args, results, check):
    lines = [f"# Decode loop: {args.tokens} tokens per stream, the {args.size} model on "
             f"{args.model_device}, {args.starts} start(s) of each service x {args.repeats} "
             "round(s) (median, min..max)", "",
             "| --wait | streams | tokens/s | TTFT p50 ms | inter-token p50 ms | "
             "inter-token p99 ms | server CPU (cores) | idle CPU (% core) |",
             "|---|---|---|---|---|---|---|---|"]
    table = {}
    for res in results:
        if res.get("error") and not res["rounds"]:
            lines.append(f"| {res['mode']} | - | {res['error']} | | | | | |")
            continue
        for n in args.streams:
            rs = [r for r in res["rounds"] if r["streams"] == n]
            if not rs:
                continue
            row = {k: median_spread(rs, k) for k in
                   ("tokens_per_s", "ttft_p50_ms", "itl_p50_ms", "itl_p99_ms", "server_cores")}
            table[(res["mode"], n)] = row
            f = lambda k, fmt: f"{row[k][0]:{fmt}} ({row[k][1]:{fmt}}..{row[k][2]:{fmt}})"
            lines.append(f"| {res['mode']} | {n} | {f('tokens_per_s', '.0f')} | "
                         f"{f('ttft_p50_ms', '.2f')} | {f('itl_p50_ms', '.3f')} | "
                         f"{f('itl_p99_ms', '.3f')} | {f('server_cores', '.3f')} | "
                         f"{100 * res.get('idle_cores', float('nan')):.2f} |")
        if res.get("error"):
            lines.append(f"| {res['mode']} | | error: {res['error']} | | | | | |")
    lines += ["", "Per decode step (last round of each point; the cudaev loop's counters "
              "from /metrics):", ""]
    for res in results:
        for n in args.streams:
            rs = [r for r in res["rounds"] if r["streams"] == n]
            if not rs or not rs[-1].get("step_ms"):
                continue
            st = rs[-1]["per_step"]
            extra = ""
            if "passes" in st:
                extra = (f": {st['passes']:.2f} passes, {st['wakeups']:.2f} fd wake-ups, "
                         f"{st['gpu_wakeups_armed']:.2f} armed, {st['timers_fired']:.2f} timers, "
                         f"{1e6 * st['spin_seconds']:.1f} us spinning")
            lines.append(f"- {res['mode']}, {n} streams: {rs[-1]['step_ms']:.3f} ms a step "
                         f"({st['steps']:.0f} steps){extra}")
    lines += ["", "Targets, cudaev against the twins:", ""]
    idle = {r["mode"]: r.get("idle_cores") for r in results}
    for n in args.streams:
        c, e, p = (table.get((m, n)) for m in MODES)
        if not (c and (e or p)):
            lines.append(f"- {n} streams: not judged (a mode has no numbers)")
            continue
        twins = [t for t in (e, p) if t]
        best_tps = max(twins, key=lambda t: t["tokens_per_s"][0])
        best_p99 = min(twins, key=lambda t: t["itl_p99_ms"][0])
        ok_tps = c["tokens_per_s"][2] >= best_tps["tokens_per_s"][1]  # spreads overlap or better
        ok_p99 = c["itl_p99_ms"][1] <= best_p99["itl_p99_ms"][2]
        lines.append(f"- {n} streams: tokens/s {c['tokens_per_s'][0]:.0f} vs better twin "
                     f"{best_tps['tokens_per_s'][0]:.0f}: {'met' if ok_tps else 'MISSED'}; "
                     f"inter-token p99 {c['itl_p99_ms'][0]:.3f} vs {best_p99['itl_p99_ms'][0]:.3f} "
                     f"ms: {'met' if ok_p99 else 'MISSED'}")
        if p:
            limit = 0.3 if n <= 16 else 0.6
            ratio = c["server_cores"][0] / p["server_cores"][0] if p["server_cores"][0] else 0
            lines.append(f"  CPU {c['server_cores'][0]:.3f} / poll {p['server_cores'][0]:.3f} "
                         f"cores = {ratio:.2f}x (target <= {limit}x): "
                         f"{'met' if ratio <= limit else 'MISSED'}")
    for m, v in idle.items():
        if v is not None:
            lines.append(f"- idle CPU, --wait {m}: {100 * v:.2f} % of a core (target <= 1 %): "
                         f"{'met' if v <= 0.01 else 'MISSED'}")
    if check is not None:
        lines += ["", f"Answers: {check['distinct_answers']} distinct answers, {check['tokens']} "
                  f"tokens checked against the one-at-a-time reference, {check['exact']} equal to "
                  f"its argmax, {len(check['bad'])} wrong" +
                  ("" if not check["bad"] else ": " + "; ".join(check["bad"][:5]))]
    return "\n".join(lines) + "\n"


def plot(args, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for res in results:
        xs = [n for n in args.streams if any(r["streams"] == n for r in res["rounds"])]
        for ax, key, label in zip(axes, ("tokens_per_s", "itl_p99_ms", "server_cores"),
                                  ("tokens/s", "inter-token p99 (ms)", "server CPU (cores)")):
            ys = [statistics.median(r[key] for r in res["rounds"] if r["streams"] == n)
                  for n in xs]
            ax.plot(xs, ys, marker="o", label=res["mode"])
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent streams")
            ax.set_title(label)
    axes[0].legend()
    fig.tight_layout()
    path = args.out + ".png"
    fig.savefig(path, dpi=110)
    return path


def main(argv=None):
    args = parse_args(argv)
    ps = prompts(max(args.streams), args.prompt_len)
    answers, results = {}, []
    by_mode = {}
    for start in range(args.starts):
        k = start % len(args.modes)
        for mode in args.modes[k:] + args.modes[:k]:
            t = time.monotonic()
            r = run_mode(args, mode, ps, answers)
            for rnd in r["rounds"]:
                rnd["start"] = start
            print(f"decode_load: --wait {mode}, start {start + 1}/{args.starts}: "
                  f"{time.monotonic() - t:.1f} s" + (f" ({r['error']})" if r.get("error") else ""),
                  flush=True)
            by_mode.setdefault(mode, []).append(r)
    for mode in args.modes:
        results.append(merge_starts(mode, by_mode[mode]))
    check = check_answers(args, ps, answers) if args.check and answers else None
    md = report(args, results, check)
    with open(args.out + ".json", "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "results": results,
                   "check": check}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(md)
    png = plot(args, results)
    print(md + f"wrote {args.out}.json, {args.out}.md" + (f", {png}" if png else ""))
    failed = any(r.get("error") or r.get("bad") for r in results) or (check and check["bad"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
