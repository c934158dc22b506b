"""What the Python service's tests share: a server started as a user would
(the master and its workers, on an ephemeral port), and HTTP helpers.

Environment: PYSERVICE_C_SERVER, the C service's binary (meson passes it),
for the tests that compare answers with the C service's CPU reference;
PYSERVICE_SLOW, a factor for timings on a loaded machine (default 1).
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import pytest
except ImportError:  # test_gpu.py also runs as a script where pytest is missing
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, SRC)
SERVER = os.path.join(SRC, "server.py")
SLOW = float(os.environ.get("PYSERVICE_SLOW", "1"))
LAYERS = "16,32,32,8"

import model as model_mod  # noqa: E402


class Server:
    """``server.py --model-device cpu`` on a free port; ``stop()`` sends SIGTERM
    and returns the exit status."""

    def __init__(self, args=(), cmd=None, workers=1, device="cpu"):
        self.dir = tempfile.mkdtemp(prefix="pyservice-")
        self.port_file = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        if cmd is None:
            cmd = [sys.executable, SERVER, "--model-device", device, "--layers", LAYERS,
                   "--workers", str(workers)]
        self.proc = subprocess.Popen(cmd + ["--port", "0", "--port-file", self.port_file] +
                                     list(args), stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60 * SLOW
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"server did not start: {self.output()}")
            time.sleep(0.05)
        self.port = int(open(self.port_file).read())
        self.model = model_mod.Model.generate(model_mod.parse_dims(LAYERS), 1)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout * SLOW)

    def request(self, method, path, body=None, headers=None, conn=None):
        c = conn or self.conn()
        if isinstance(body, str):
            body = body.encode()
        h = dict(headers or {})
        if body is not None and method == "POST" and "Content-Type" not in h:
            h["Content-Type"] = "application/json"
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hd = {k.lower(): v for k, v in r.getheaders()}
        if conn is None:
            c.close()
        return r.status, hd, data

    def infer(self, x, raw=False, conn=None, headers=None):
        """(status, headers, outputs as float32 or None, body)."""
        h = dict(headers or {})
        if raw:
            h["Content-Type"] = "application/octet-stream"
            body = np.asarray(x, "<f4").tobytes()
        else:
            body = json.dumps([float(v) for v in x])
        st, hd, data = self.request("POST", "/v1/infer", body, h, conn)
        y = None
        if st == 200:
            y = np.frombuffer(data, "<f4") if raw else np.array(json.loads(data), np.float32)
        return st, hd, y, data

    def metrics(self):
        _, _, data = self.request("GET", "/metrics")
        m = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                m[k] = float(v)
        return m

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def raw_http(port, data, read_timeout=5.0):
    """Sends bytes, returns all read until the server closes or the timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout * SLOW)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        pass
    s.close()
    return got


if pytest is not None:
    @pytest.fixture
    def rng():
        return np.random.default_rng(1)
