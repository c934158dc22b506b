"""CPU test of bench-http-floor (bench/http_floor.c): keep-alive answers,
pipelined requests, /metrics, a request that cannot fit, and exit 0 on
SIGTERM. Usage: test_http_floor.py BINARY"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        port_file = os.path.join(d, "port")
        p = subprocess.Popen([binary, "--port", "0", "--port-file", port_file,
                              "--backend", "cpu", "--max-connections", "10"],
                             stdout=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                    break
                assert p.poll() is None, "the server exited before listening"
                time.sleep(0.02)
            port = int(open(port_file).read())
            run(port)
        finally:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=10)
        assert rc == 0, f"exit status {rc} after SIGTERM"
    print("http floor: all checks passed")


def run(port):
    body = json.dumps([0.5] * 64)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(3):  # one keep-alive connection
        c.request("POST", "/v1/infer", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, r.status
        assert len(json.loads(r.read())) == 16
    c.request("GET", "/metrics")
    r = c.getresponse()
    assert r.status == 200 and r.read().startswith(b"#")
    c.close()

    # Pipelined: three requests in one write, the third split across two.
    req = (f"POST /v1/infer HTTP/1.1\r\nHost: x\r\ncontent-length: {len(body)}\r\n\r\n"
           f"{body}").encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(req * 2 + req[:40])
    time.sleep(0.05)
    s.sendall(req[40:])
    got = b""
    while got.count(b"HTTP/1.1 200") < 3 or not got.endswith(b"]\n"):
        chunk = s.recv(65536)
        assert chunk, f"closed after {got.count(b'HTTP/1.1 200')} answers"
        got += chunk
    assert got.count(b"HTTP/1.1 200") == 3, got
    s.close()

    # Headers that never end within the buffer: the connection is dropped.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * 20000)
        assert s.recv(100) == b"", "an oversize request was not dropped"
    except ConnectionResetError:
        pass
    s.close()


main()
