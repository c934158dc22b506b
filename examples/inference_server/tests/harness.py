"""The test harness of service_test.py: a server process on an ephemeral
loopback port (its output kept, its exit checked for sanitizer reports), an
HTTP client on it, raw sockets for what http.client will not send, and the
checks against the Python reference of the MLP (mlp_ref.py)."""
import http.client
import json
import os
import atexit
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import mlp_ref

# Small enough for plain Python's reference; large enough to be an MLP.
CPU_LAYERS = "16,32,32,8"
GPU_LAYERS = "64,256,256,16"
TOL = 1e-5
# Sanitized builds run several times slower.
SLOW = float(os.environ.get("INFER_TEST_SLOW", "1"))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Connection(http.client.HTTPConnection):
    """http.client's connection, but a request leaves in one send, headers
    and body together, as curl and browsers send a small request. Python's
    own sends them apart, and a client thread that then waits for the GIL
    (hundreds of client threads on two cores) sends its body late: to the
    server it is a slow client, which --body-deadline-ms exists to cut."""

    def _send_output(self, message_body=None, encode_chunked=False):
        if isinstance(message_body, (bytes, bytearray)) and not encode_chunked:
            self._buffer.extend((b"", b""))
            msg = b"\r\n".join(self._buffer) + message_body
            del self._buffer[:]
            self.send(msg)
        else:
            super()._send_output(message_body, encode_chunked)


class Server:
    """A server process on an ephemeral port; its output is kept."""

    def __init__(self, args, extra, env=None, expect_start=True):
        self.workdir = tempfile.mkdtemp(prefix="infer-test-")
        # Removed when the test program ends, not with the server: a test
        # may start a second server on the first one's weights file.
        atexit.register(shutil.rmtree, self.workdir, True)
        self.weights = os.path.join(self.workdir, "weights.bin")
        cmd = [args.server, "--port", "0", "--backend", args.backend,
               "--weights", self.weights,
               "--layers", GPU_LAYERS if args.backend == "gpu" else CPU_LAYERS] + extra
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.out, self.err = [], []
        self.port = None
        started = threading.Event()

        def read_out():
            for line in self.proc.stdout:
                self.out.append(line)
                m = re.search(r"listening on http://[0-9.]+:(\d+)/", line)
                if m:
                    self.port = int(m.group(1))
                    started.set()
            started.set()

        def read_err():
            for line in self.proc.stderr:
                self.err.append(line)

        self.threads = [threading.Thread(target=read_out, daemon=True),
                        threading.Thread(target=read_err, daemon=True)]
        for t in self.threads:
            t.start()
        started.wait(60 * SLOW)
        if expect_start and self.port is None:
            self.proc.kill()
            self.proc.wait()
            for t in self.threads:
                t.join(5)
            raise Failure("server did not start: " + " ".join(cmd) + "\n" + self.log())
        if "--weights" in extra:
            self.weights = extra[len(extra) - 1 - extra[::-1].index("--weights") + 1]
        self.model = mlp_ref.Model(self.weights) if self.port else None
        self.signalled = False
        if self.port and args.expect_cudart:
            maps = open(f"/proc/{self.proc.pid}/maps").read()
            libs = {l.split()[-1] for l in maps.splitlines() if "libcudart.so" in l}
            want = os.path.realpath(args.expect_cudart)
            check({os.path.realpath(p) for p in libs} == {want},
                  f"loaded {sorted(libs)}, want {want}")

    def send(self, sig):
        self.signalled = True
        self.proc.send_signal(sig)

    def log(self):
        return "".join("  | " + l for l in self.out + self.err)

    def conn(self, timeout=30):
        return Connection("127.0.0.1", self.port, timeout=timeout * SLOW)

    def request(self, method, path, body=None, headers=None, conn=None):
        """(status, headers dict lower-cased, body bytes, seconds)."""
        own = conn is None
        c = conn or self.conn()
        t0 = time.monotonic()
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        dt = time.monotonic() - t0
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if own:
            c.close()
        return r.status, hdrs, data, dt

    def infer(self, x, raw=False, conn=None, headers=None):
        h = dict(headers or {})
        if raw:
            h["Content-Type"] = "application/octet-stream"
            body = struct.pack(f"<{len(x)}f", *x)
        else:
            h["Content-Type"] = "application/json"
            body = json.dumps(x)
        st, hd, data, dt = self.request("POST", "/v1/infer", body, h, conn)
        y = None
        if st == 200:
            y = (list(struct.unpack(f"<{len(data) // 4}f", data)) if raw else json.loads(data))
        return st, hd, y, data, dt

    def metrics(self):
        st, _, data, _ = self.request("GET", "/metrics")
        check(st == 200, f"/metrics: {st}")
        values = {}
        for line in data.decode().splitlines():
            if line.startswith("#") or not line:
                continue
            m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)', line)
            check(m is not None, f"/metrics: malformed line {line!r}")
            values[m.group(1)] = float(m.group(2))
        return values

    def stop(self, sig=signal.SIGTERM, timeout=30, want=0):
        """Signals (unless a test did) and waits for the exit."""
        if self.proc.poll() is None and not self.signalled:
            self.send(sig)
        try:
            rc = self.proc.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure(f"server did not exit within {timeout * SLOW:.0f} s of signal {sig}\n"
                          + self.log())
        for t in self.threads:
            t.join(10)
        text = "".join(self.err)
        check("Sanitizer" not in text and "runtime error" not in text,
              "sanitizer report:\n" + self.log())
        if want is not None:
            check(rc == want, f"exit status {rc}, want {want}\n" + self.log())
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def rand_input(model, rng):
    return [round(rng.uniform(-1, 1), 4) for _ in range(model.inputs)]


def check_answer(model, x, y, what):
    check(y is not None and len(y) == model.outputs, f"{what}: wrong output length")
    err = mlp_ref.rel_err(y, model.forward(x))
    check(err <= TOL, f"{what}: relative error {err:.3g} > {TOL}")


def infer_ok(s, rng, n, conn=None, what="request"):
    """n inference requests of random inputs (on `conn`, or a connection
    each), each answered 200 with the reference's outputs."""
    for i in range(n):
        x = rand_input(s.model, rng)
        st, _, y, _, _ = s.infer(x, conn=conn)
        check(st == 200, f"{what} {i}: {st}")
        check_answer(s.model, x, y, f"{what} {i}")


def raw_http(port, data, read_timeout=5.0):
    """Sends bytes, returns everything read until the server closes or the
    timeout (http.client will not send malformed or chunked requests)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout * SLOW)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got:
                head, _, rest = got.partition(b"\r\n\r\n")
                m = re.search(rb"content-length: *(\d+)", head, re.I)
                if m and len(rest) >= int(m.group(1)):
                    break
    except socket.timeout:
        pass
    s.close()
    return got


def fd_flags(pid):
    """{fd: flags} of a process's open fds, from /proc/PID/fdinfo."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            for line in open(f"/proc/{pid}/fdinfo/{name}"):
                if line.startswith("flags:"):
                    out[int(name)] = int(line.split()[1], 8)
        except OSError:  # closed meanwhile
            pass
    return out


def check_cloexec(pid, what):
    bad = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd, fl in fd_flags(pid).items()
           if fd > 2 and not fl & 0o2000000}
    check(not bad, f"{what}: fds without O_CLOEXEC: {bad}")
