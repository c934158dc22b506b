"""bench/serve_probe.py against the service on the CPU path: the numbers it
reports come from the server's own counters, summed over every worker."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SERVER, SRC

PROBE = os.path.join(os.path.dirname(os.path.dirname(SRC)), "bench", "serve_probe.py")


@pytest.mark.skipif(shutil.which("wrk") is None and not os.environ.get("WRK"),
                    reason="no wrk (Debian's wrk)")
def test_probe_sums_every_workers_counters(tmp_path):
    out = tmp_path / "probe.json"
    p = subprocess.run(
        [sys.executable, PROBE, "--connections", "8", "--seconds", "1", "--warmup", "1",
         "--json", str(out), "--", sys.executable, SERVER, "--model-device", "cpu",
         "--layers", "64,32,16", "--workers", "2", "--port", "0", "--port-file", "PORTFILE"],
        capture_output=True, text=True, timeout=180, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text())
    assert d["workers_scraped"] == 2
    c = d["counters"]
    ok = c['infer_requests_total{code="200"}']
    # Every answer wrk counted, and at most the connections' worth in flight
    # at each end of the window (the warm-up's last, the window's last).
    assert d["requests"] <= ok <= d["requests"] + 2 * 8, (d["requests"], ok)
    assert c["infer_batch_rows_total"] == ok
    assert 1 <= d["rows_per_batch"] <= 8
    assert d["cpu_us_per_request"] > 0
    names = {t["name"] for t in d["threads"]}
    assert any(n.startswith("python") for n in names), names
    assert "requests/s" in p.stdout and "rows a batch" in p.stdout
