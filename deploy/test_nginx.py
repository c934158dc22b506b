#!/usr/bin/env python3
"""nginx in front of two inference service processes, on loopback
(docs/scale-out.md): deploy/scale-out.sh starts them, client threads keep
POSTing through nginx, one backend is killed with SIGKILL mid-run and later
started again on its port, and deploy/scrape.sh scrapes both.

Checked:
- no request fails but those in flight to the killed backend at the kill
  (with the retry of deploy/nginx.conf.in: none), and every answer is its
  input's;
- every request that starts after the kill and ends before the restart is
  answered by the survivor;
- after the restart nginx sends requests to the backend again, within its
  fail_timeout (and some slack);
- each backend's own count of answers (its /metrics) equals the answers the
  clients got from it (X-Upstream, the last address nginx tried), exactly;
- the scrape is one valid exposition (a family's lines together, HELP and
  TYPE once) with both instances' samples under distinct instance labels;
- stop ends nginx and both services, and nginx logged nothing worse than
  the errors of the kill.

Exit 77 (skipped) where nginx is not installed. Standard library only.

  test_nginx.py --server PATH [--backend cpu|gpu] [--out DIR]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "scale-out.sh")
SCRAPE = os.path.join(HERE, "scrape.sh")
# Sanitized builds are several times slower: the timings widen.
SLOW = float(os.environ.get("INFER_TEST_SLOW", "1"))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def log(*a):
    print(*a, flush=True)


class Connection(http.client.HTTPConnection):
    """A request leaves in one send, headers and body together (as curl
    sends a small one): a client thread that waits for the GIL between two
    sends would look like a slow client to the service."""

    def _send_output(self, message_body=None, encode_chunked=False):
        if isinstance(message_body, (bytes, bytearray)) and not encode_chunked:
            self._buffer.extend((b"", b""))
            msg = b"\r\n".join(self._buffer) + message_body
            del self._buffer[:]
            self.send(msg)
        else:
            super()._send_output(message_body, encode_chunked)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(cond, secs, what):
    deadline = time.monotonic() + secs * SLOW
    while not cond():
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not within {secs * SLOW:.0f} s")
        time.sleep(0.01)


def same_answer(body, want, exact):
    """The CPU backend computes a row the same whatever its batch: its
    answers must be the same bytes. cuBLAS may pick another kernel for
    another batch size: GPU answers agree within twice the service's own
    tolerance against the reference (1e-5 relative, as its tests check)."""
    if exact:
        return body == want
    try:
        y, e = json.loads(body), json.loads(want)
    except ValueError:
        return False
    if len(y) != len(e):
        return False
    diff = sum((a - b) ** 2 for a, b in zip(y, e)) ** 0.5
    return diff <= 2e-5 * max(sum(b * b for b in e) ** 0.5, 1e-30)


class Record:
    __slots__ = ("t0", "t1", "status", "upstreams", "ok", "error")


class Load:
    """Client threads, each on one kept-alive connection to nginx, POSTing
    its inputs in turn until stopped; every request is recorded."""

    def __init__(self, port, inputs, expected, clients, exact):
        self.port, self.inputs, self.expected, self.exact = port, inputs, expected, exact
        self.stop = threading.Event()
        self.records = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                        for i in range(clients)]

    def client(self, k):
        conn = Connection("127.0.0.1", self.port, timeout=30 * SLOW)
        i = k
        while not self.stop.is_set():
            i = (i + 1) % len(self.inputs)
            r = Record()
            r.status, r.upstreams, r.ok, r.error = None, [], False, None
            r.t0 = time.monotonic()
            try:
                conn.request("POST", "/v1/infer", body=self.inputs[i],
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
                r.status = resp.status
                r.upstreams = [u.strip() for u in (resp.getheader("X-Upstream") or "").split(",")
                               if u.strip()]
                r.ok = resp.status == 200 and same_answer(body, self.expected[i], self.exact)
                if resp.status == 200 and not r.ok:
                    r.error = f"wrong answer for input {i}: {body[:80]!r}"
                elif resp.status != 200:
                    r.error = f"{resp.status}: {body[:120]!r}"
            except (OSError, http.client.HTTPException) as e:
                r.error = f"{type(e).__name__}: {e}"
                conn.close()
                conn = Connection("127.0.0.1", self.port, timeout=30 * SLOW)
            r.t1 = time.monotonic()
            with self.lock:
                self.records.append(r)
        conn.close()

    def snapshot(self):
        with self.lock:
            return list(self.records)

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(60 * SLOW)
            check(not t.is_alive(), "a client thread did not finish")


def get(port, path):
    c = Connection("127.0.0.1", port, timeout=10 * SLOW)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def post(port, body):
    c = Connection("127.0.0.1", port, timeout=10 * SLOW)
    try:
        c.request("POST", "/v1/infer", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        check(r.status == 200, f"POST to 127.0.0.1:{port}: {r.status} {data[:120]!r}")
        return data
    finally:
        c.close()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')


def parse_exposition(text):
    """Checks the text format's grouping rules; returns {(name, labels): value}
    with labels a frozenset of (key, value) pairs."""
    samples, seen_help, seen_type, closed, cur = {}, set(), set(), set(), None
    for line in text.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^# (HELP|TYPE) (\S+)", line)
        if m:
            kind, fam = m.groups()
            seen = seen_help if kind == "HELP" else seen_type
            check(fam not in seen, f"scrape: a second {kind} line for {fam}")
            seen.add(fam)
            if fam != cur:
                check(fam not in closed, f"scrape: family {fam} resumed after another")
                if cur:
                    closed.add(cur)
                cur = fam
            continue
        check(not line.startswith("#"), f"scrape: stray comment {line!r}")
        m = SAMPLE.match(line)
        check(m, f"scrape: not a sample line: {line!r}")
        name, _, labels, value = m.groups()
        fam = cur if cur and (name == cur or name.startswith(cur + "_")) else name
        if fam != cur:
            check(fam not in closed, f"scrape: family {fam} resumed after another")
            if cur:
                closed.add(cur)
            cur = fam
        pairs = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or "")
        keys = [k for k, _ in pairs]
        check(len(keys) == len(set(keys)), f"scrape: a label twice in {line!r}")
        key = (name, frozenset(pairs))
        check(key not in samples, f"scrape: a sample twice: {line!r}")
        samples[key] = float(value)
    return samples


def metric(samples, name, **labels):
    want = frozenset(labels.items())
    return samples.get((name, want))


def run(args, work):
    nginx_port = free_port()
    layers = "16,32,32,8" if args.backend == "cpu" else "64,256,256,16"
    n_in = int(layers.split(",")[0])
    # The CPU backend takes --cpu-delay-us per batch, a GPU's latency made
    # long enough that requests are surely in flight at the kill.
    service_args = ["--layers", layers, "--deadline-ms", str(int(10000 * SLOW))]
    if args.backend == "cpu":
        service_args += ["--cpu-delay-us", "20000"]
    fail_timeout = args.fail_timeout
    start = subprocess.run(["bash", LAUNCHER, "start", work, "--listen", f"127.0.0.1:{nginx_port}",
                            "--server", args.server, "--backend", args.backend,
                            "--fail-timeout", str(fail_timeout), "--ready-timeout",
                            str(int(60 * SLOW)), "--"] + service_args,
                           capture_output=True, text=True, timeout=180 * SLOW)
    log(start.stdout.rstrip())
    check(start.returncode == 0, f"scale-out.sh start: exit {start.returncode}\n{start.stderr}")
    backends = open(os.path.join(work, "backends")).read().split()
    check(len(backends) == 2, f"two backends, got {backends}")
    pids = [int(open(os.path.join(work, f"backend-{i}.pid")).read()) for i in range(2)]
    ports = [int(b.rsplit(":", 1)[1]) for b in backends]
    nginx_pid = int(open(os.path.join(work, "nginx", "nginx.pid")).read())

    # Inputs and their answers, asked of backend 0 directly: the same
    # weights (seed 1) on both, so the same answer from either.
    inputs = [json.dumps([round((i * 7 + j) % 13 / 13 - 0.5, 3) for j in range(n_in)]).encode()
              for i in range(16)]
    expected = [post(ports[0], b) for b in inputs]
    direct_to_0 = len(inputs)

    load = Load(nginx_port, inputs, expected, args.clients, args.backend == "cpu")
    load.start()
    try:
        # Load on both before the kill.
        def both_served():
            last = {r.upstreams[-1] for r in load.snapshot() if r.upstreams and r.ok}
            return set(backends) <= last and len(load.snapshot()) >= 200
        wait_for(both_served, 30, "answers from both backends")

        victim, survivor = backends[1], backends[0]
        t_kill = time.monotonic()
        os.kill(pids[1], signal.SIGKILL)
        wait_for(lambda: not alive(pids[1]), 10, "the killed backend's exit")
        t_dead = time.monotonic()
        # Run on the survivor alone for a while.
        n_kill = len(load.snapshot())
        wait_for(lambda: time.monotonic() - t_kill >= 1.5 and len(load.snapshot()) >= n_kill + 200,
                 30, "200 requests after the kill")

        t_restart = time.monotonic()
        rs = subprocess.run(["bash", LAUNCHER, "restart", work, "1"], capture_output=True,
                            text=True, timeout=120 * SLOW)
        check(rs.returncode == 0, f"scale-out.sh restart: exit {rs.returncode}\n{rs.stderr}")
        t_ready = time.monotonic()
        pids[1] = int(open(os.path.join(work, "backend-1.pid")).read())

        def victim_back():
            return any(r.t0 >= t_ready and r.upstreams == [victim] and r.ok
                       for r in load.snapshot())
        wait_for(victim_back, fail_timeout + 10, "nginx sending to the restarted backend")
        t_back = time.monotonic()
    finally:
        load.finish()
    recs = load.records

    in_flight = [r for r in recs if r.t0 < t_kill < r.t1 and r.upstreams and
                 r.upstreams[0] == victim]
    failures = [r for r in recs if not r.ok]
    retried = [r for r in recs if len(r.upstreams) > 1]
    after_kill = [r for r in recs if t_kill <= r.t0 and r.t1 <= t_restart]
    log(f"requests: {len(recs)}; in flight to the killed backend at the kill: {len(in_flight)}; "
        f"retried on the other backend: {len(retried)} "
        f"({sum(1 for r in retried if r.t0 < t_kill)} sent before the kill); failed: "
        f"{len(failures)}; between kill and restart: {len(after_kill)}; "
        f"restarted backend served again {t_back - t_ready:.2f} s after it was ready "
        f"(fail_timeout {fail_timeout} s)")
    for r in failures[:10]:
        log(f"  failed: {r.error} (upstreams {r.upstreams}, "
            f"{'in flight at the kill' if r.t0 < t_kill < r.t1 else 'not in flight at the kill'})")
    check(all(r in in_flight or (r.t0 < t_kill < r.t1 and not r.upstreams) for r in failures),
          "a request failed that was not in flight to the killed backend at the kill")
    check(len(failures) <= len(in_flight), f"{len(failures)} failures > {len(in_flight)} in flight")
    if args.backend == "cpu":
        # 20 ms batches under load: the kill cannot fall between them.
        check(in_flight, "no request was in flight to the killed backend: the kill tested nothing")
    check(after_kill, "no request between the kill and the restart")
    bad = [r for r in after_kill if not (r.ok and r.upstreams[-1] == survivor)]
    check(not bad, f"{len(bad)} requests after the kill not answered by the survivor, e.g. "
          f"{bad[0].error if bad else ''} {bad[0].upstreams if bad else ''}")

    # Each backend's count of answers against what the clients saw. Backend
    # 0 ran throughout; backend 1's counters began again at its restart, and
    # what it answered to a request sent after its old process was gone was
    # answered by the new one.
    st, text = get(nginx_port, "/backend/1/health")
    check(st == 200, f"/backend/1/health through nginx: {st}")
    sc = subprocess.run(["bash", SCRAPE] + [f"backend{i}=http://127.0.0.1:{nginx_port}"
                                            f"/backend/{i}/metrics" for i in range(2)],
                        capture_output=True, text=True, timeout=30 * SLOW)
    check(sc.returncode == 0, f"scrape.sh: exit {sc.returncode}: {sc.stderr}")
    with open(os.path.join(work, "scrape.txt"), "w") as f:
        f.write(sc.stdout)
    samples = parse_exposition(sc.stdout)
    served = [sum(1 for r in recs if r.ok and r.upstreams[-1] == b and
                  (i == 0 or r.t0 > t_dead)) for i, b in enumerate(backends)]
    served[0] += direct_to_0
    for i in range(2):
        inst = f"backend{i}"
        up = metric(samples, "scrape_target_up", instance=inst)
        check(up == 1, f"scrape_target_up{{instance={inst}}} = {up}")
        got = metric(samples, "infer_requests_total", instance=inst, code="200")
        check(got == served[i], f"{inst}: its metrics count {got} answers (200), the clients "
              f"got {served[i]} from it")
        direct = parse_exposition(get(ports[i], "/metrics")[1])
        check(metric(direct, "infer_requests_total", code="200") == got,
              f"{inst}: the scrape's count differs from its own /metrics")
    log(f"scrape: {len(samples)} samples; infer_requests_total{{code=200}}: backend0 "
        f"{served[0]}, backend1 {served[1]} (since its restart), as the clients counted")

    stop = subprocess.run(["bash", LAUNCHER, "stop", work], capture_output=True, text=True,
                          timeout=120 * SLOW)
    check(stop.returncode == 0, f"scale-out.sh stop: exit {stop.returncode}\n{stop.stderr}")
    for pid, what in [(nginx_pid, "nginx")] + [(p, f"backend {i}") for i, p in enumerate(pids)]:
        check(not alive(pid), f"{what} (pid {pid}) still running after stop")
    errlog = open(os.path.join(work, "nginx", "error.log")).read()
    worse = [l for l in errlog.splitlines() if re.search(r"\[(emerg|alert|crit)\]", l)]
    check(not worse, "nginx's error.log:\n" + "\n".join(worse[:10]))
    log(f"nginx error.log: {sum(1 for l in errlog.splitlines() if '[error]' in l)} [error] lines "
        "(the kill's), none worse")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="the inference service program")
    ap.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--fail-timeout", type=int, default=2)
    ap.add_argument("--out", help="keep the deployment's directory (logs) there")
    args = ap.parse_args()
    if not (shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)):
        print("SKIP: nginx is not installed (Debian package nginx; tools/deps.sh installs it)")
        return 77
    if args.backend == "gpu" and not os.path.exists("/dev/nvidia0"):
        print("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)")
        return 77
    for prog in ("curl", "setpriv"):
        if not shutil.which(prog):
            print(f"FAIL: {prog} not found (tools/deps.sh installs it)")
            return 1
    # Under /tmp, not the build tree or --out: run as root, nginx runs as
    # nobody, which must reach its directory. Copied to --out at the end.
    work = tempfile.mkdtemp(prefix="nginx-test-")
    ok = False
    try:
        run(args, work)
        ok = True
    except Failure as e:
        log(f"FAIL: {e}")
    finally:
        # Whatever happened, nothing of ours keeps running.
        subprocess.run(["bash", LAUNCHER, "stop", work], capture_output=True, timeout=120 * SLOW)
        if args.out:
            shutil.copytree(work, args.out, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("tmp"))
            log(f"logs in {args.out}")
        elif not ok:
            log(f"logs in {work}")
    if ok or args.out:
        shutil.rmtree(work, ignore_errors=True)
    if not ok:
        return 1
    log("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
