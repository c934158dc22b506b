#!/usr/bin/env python3
"""CPU test of bench/serve_ab.py: variant specs parsed into environment,
server and arguments; rounds run in alternating order; runs merged into
medians, spreads and per-round ratios to the first variant; failed runs
reported, not counted."""
import os
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_ab as ab  # noqa: E402


def run(rps, p50, wakeups=None, requests=1000, armed=None, completions=None):
    counters = {}
    if wakeups is not None:
        counters["cudaev_loop_wakeups_total"] = wakeups
    if armed is not None:
        counters["cudaev_loop_gpu_wakeups_armed_total"] = armed
        counters["cudaev_loop_gpu_completions_total"] = completions
    return {"rps": rps, "p50_us": p50, "p99_us": 2 * p50, "cpu_us_per_request": 400,
            "requests": requests, "counters": counters}


class Variants(unittest.TestCase):
    def test_spec_words_split_into_environment_server_and_arguments(self):
        v = ab.parse_variant("old=PYTHONPATH=/tmp/old server=/t/server.py --wait cudaev "
                             "--layers=64,256,16")
        self.assertEqual(v["name"], "old")
        self.assertEqual(v["env"], {"PYTHONPATH": "/tmp/old"})
        self.assertEqual(v["server"], "/t/server.py")
        self.assertEqual(v["args"], ["--wait", "cudaev", "--layers=64,256,16"])

    def test_a_wheel_is_unpacked_and_put_first_on_the_variants_path(self):
        with tempfile.TemporaryDirectory() as d:
            whl = os.path.join(d, "cudaev-0-cp311-abi3-linux_x86_64.whl")
            with zipfile.ZipFile(whl, "w") as z:
                z.writestr("cudaev/__init__.py", "MARK = 1\n")
            vs = [ab.parse_variant(f"old=wheel={whl} PYTHONPATH=/keep --wait cudaev"),
                  ab.parse_variant("new=--wait cudaev")]
            self.assertEqual(vs[0]["wheel"], whl)
            ab.unpack_wheels(vs, d)
            site = os.path.join(d, "old")
            self.assertEqual(vs[0]["env"]["PYTHONPATH"], site + os.pathsep + "/keep")
            self.assertTrue(os.path.isfile(os.path.join(site, "cudaev", "__init__.py")))
            self.assertNotIn("PYTHONPATH", vs[1]["env"])
            md = ab.report([1], ab.summarize(["old", "new"], [1], {}), vs)
            self.assertIn(f"- `old`: wheel={whl} PYTHONPATH=/keep --wait cudaev", md)
            bad = [ab.parse_variant(f"x=wheel={os.path.join(d, 'missing.whl')}")]
            with self.assertRaises(ValueError):
                ab.unpack_wheels(bad, d)

    def test_an_empty_spec_is_the_server_as_it_is(self):
        v = ab.parse_variant("base=")
        self.assertEqual((v["env"], v["wheel"], v["server"], v["args"]), ({}, None, ab.SERVER, []))

    def test_malformed_names_are_refused(self):
        for bad in ("--wait poll", "=--wait poll", "a b=--wait poll", "x/y=--wait poll"):
            with self.assertRaises(ValueError, msg=bad):
                ab.parse_variant(bad)

    def test_every_other_round_runs_in_the_opposite_order(self):
        self.assertEqual(ab.order("abc", 0), ["a", "b", "c"])
        self.assertEqual(ab.order("abc", 1), ["c", "b", "a"])
        self.assertEqual(ab.order("abc", 2), ["a", "b", "c"])


class Summary(unittest.TestCase):
    def setUp(self):
        self.runs = {
            ("new", 16, 0): run(9000, 1700, wakeups=500, armed=80, completions=100),
            ("old", 16, 0): run(7200, 2000, wakeups=1000, armed=90, completions=100),
            ("new", 16, 1): run(8400, 1800, wakeups=700, armed=70, completions=100),
            ("old", 16, 1): run(7000, 1900, wakeups=1000, armed=95, completions=100),
            ("new", 16, 2): run(8800, 1750),
            ("old", 16, 2): {"error": "serve_probe exit 2: no wrk"},
            ("new", 1, 0): {"error": "over --run-timeout 90 s"},
            ("old", 1, 0): run(1500, 600),
        }
        self.s = ab.summarize(["new", "old"], [16, 1], self.runs)

    def test_medians_and_spreads_over_the_rounds_that_measured(self):
        new = self.s[16]["new"]
        self.assertEqual(new["n"], 3)
        self.assertEqual(new["requests/s"], (8800, 8400, 9000))
        self.assertEqual(new["p50 µs"], (1750, 1700, 1800))
        old = self.s[16]["old"]
        self.assertEqual(old["n"], 2)
        self.assertEqual(old["requests/s"], (7100, 7000, 7200))
        self.assertEqual(old["errors"], ["serve_probe exit 2: no wrk"])

    def test_ratios_pair_each_round_with_the_first_variants_same_round(self):
        lo, hi = 7000 / 8400, 7200 / 9000
        med, mn, mx = self.s[16]["old"]["ratio"]
        self.assertAlmostEqual(mn, min(lo, hi))
        self.assertAlmostEqual(mx, max(lo, hi))
        self.assertAlmostEqual(med, (lo + hi) / 2)
        # The first variant against itself, in the rounds it measured.
        self.assertEqual(self.s[16]["new"]["ratio"], (1.0, 1.0, 1.0))
        # No ratio where the first variant did not measure that round.
        self.assertNotIn("ratio", self.s[1]["old"])

    def test_counters_become_per_request_and_per_completion(self):
        wake = self.s[16]["old"]["loop fd wake-ups a request"]
        self.assertEqual(wake, (1.0, 1.0, 1.0))
        armed = self.s[16]["new"]["armed wake-ups a GPU completion"]
        self.assertEqual(armed, (0.75, 0.7, 0.8))
        self.assertNotIn("loop fd wake-ups a request", self.s[1]["old"])

    def test_the_report_shows_each_cell_and_every_failed_run(self):
        variants = [ab.parse_variant("new=--wait cudaev"),
                    ab.parse_variant("old=PYTHONPATH=/tmp/old --wait cudaev")]
        md = ab.report([16, 1], self.s, variants)
        self.assertIn("- `old`: PYTHONPATH=/tmp/old --wait cudaev", md)
        self.assertIn("| old | 16 | 2 | 0.82× (0.80×..0.83×) | 7,100 (7,000..7,200) |", md)
        self.assertIn("| new | 1 | 0 |  |", md)
        self.assertIn("- new at 1 connections: over --run-timeout 90 s", md)
        self.assertIn("- old at 16 connections: serve_probe exit 2: no wrk", md)


if __name__ == "__main__":
    unittest.main()
