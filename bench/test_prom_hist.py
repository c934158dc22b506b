#!/usr/bin/env python3
"""CPU test of bench/prom_hist.py on two synthetic scrapes."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prom_hist  # noqa: E402


def scrape(counts, total):
    """A histogram `h_seconds` with cumulative bucket counts over le =
    0.001, 0.0025, 0.005 (seconds) and +Inf."""
    les = ("0.001", "0.0025", "0.005")
    lines = ["# HELP h_seconds a test\n", "# TYPE h_seconds histogram\n"]
    for le, c in zip(les, counts):
        lines.append(f'h_seconds_bucket{{le="{le}"}} {c}\n')
    lines.append(f'h_seconds_bucket{{le="+Inf"}} {total}\n')
    lines.append(f"h_seconds_sum 1.5\nh_seconds_count {total}\nother_total 7\n")
    return "".join(lines)


class P99(unittest.TestCase):
    def test_interval_only(self):
        # before: 1000 observations all under 1 ms; after: 1000 more, of which
        # 980 under 1 ms, 985 under 2.5 ms, 1000 under 5 ms: p99 = 5 ms
        before = {}
        after = {}
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("m0", scrape((1000, 1000, 1000), 1000)),
                               ("m1", scrape((1980, 1985, 2000), 2000))):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            before, after = prom_hist.load(os.path.join(d, "m0")), prom_hist.load(
                os.path.join(d, "m1"))
            self.assertEqual(prom_hist.p99_ms(before, after, "h_seconds"), "5")
            # 99 % under 2.5 ms when 990 of the 1000 new ones are
            with open(os.path.join(d, "m2"), "w") as f:
                f.write(scrape((1500, 1990, 2000), 2000))
            self.assertEqual(prom_hist.p99_ms(before, prom_hist.load(os.path.join(d, "m2")),
                                              "h_seconds"), "2.5")
            out = subprocess.run([sys.executable, os.path.join(HERE, "prom_hist.py"),
                                  os.path.join(d, "m0"), os.path.join(d, "m1"), "h_seconds",
                                  "absent_seconds"], capture_output=True, text=True, check=True)
            self.assertEqual(out.stdout.strip(), "5,")

    def test_missing_or_empty(self):
        self.assertEqual(prom_hist.load("/nonexistent/metrics"), {})
        self.assertEqual(prom_hist.p99_ms({}, {}, "h_seconds"), "")
        same = {"h_seconds_count": 5.0, 'h_seconds_bucket{le="0.001"}': 5.0}
        self.assertEqual(prom_hist.p99_ms(same, same, "h_seconds"), "")


if __name__ == "__main__":
    unittest.main()
