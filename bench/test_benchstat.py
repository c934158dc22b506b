#!/usr/bin/env python3
"""CPU self-test of bench/benchstat.py and bench/run.sh (Meson suite 'unit').

Feeds synthetic program output with known samples through the statistics,
the targets evaluation and the table, and runs bench/run.sh end to end on
fake benchmark programs (shell scripts that speak the output protocol and
report a libcudart path the way the real programs do).
"""

import contextlib
import gzip
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchstat as bs  # noqa: E402

TARGETS = """
# comment
higher bw_gbps
lat_us      ratio <= 0.95
slow_us     ratio <= 1.0
bw_gbps     ratio >= 0.99
noisy_us    ratio <= 1.0
lat_us      p99 <= 12 cudaev
loopy_us/lat_us@nvidia  p50 <= 1.15 cudaev
absent_us   p50 <= 1 cudaev
plot both lat_us loopy_us
"""


def protocol(metrics, end=True, bench="b"):
    """stdout text: {metric: [values]} inside one bench block."""
    out = ["bench %s" % bench]
    for m, vs in metrics.items():
        out.append("unit %s %s" % (m, "GB/s" if m.endswith("gbps") else "us"))
        out += ["sample %s %r" % (m, v) for v in vs]
    if end:
        out.append("end %s 0.5" % bench)
    return "\n".join(out) + "\n"


class Stats(unittest.TestCase):
    def test_percentile(self):
        self.assertEqual(bs.percentile([4, 1, 3, 2], 50), 2.5)
        self.assertEqual(bs.percentile([5], 99), 5)
        self.assertAlmostEqual(bs.percentile(list(range(1, 101)), 99), 99.01)
        self.assertEqual(bs.percentile([1, 2, 3], 0), 1)
        self.assertEqual(bs.percentile([1, 2, 3], 100), 3)
        self.assertIsNone(bs.percentile([], 50))
        self.assertEqual(bs.stat([1, 2, 3, 10], "mean"), 4)
        self.assertEqual(bs.stat([1, 2, 3, 10], "max"), 10)
        self.assertEqual(bs.stat([1, 2, 3, 10], "median"), 2.5)
        self.assertAlmostEqual(bs.stat(list(range(101)), "p90"), 90)

    def test_verdict(self):
        self.assertEqual(bs.verdict(1.02, (0.99, 1.05), False), "same")  # 1 inside the spread
        self.assertEqual(bs.verdict(1.03, (1.01, 1.05), False), "same")  # |0.03| <= 0.04
        self.assertEqual(bs.verdict(1.10, (1.08, 1.12), False), "slower")
        self.assertEqual(bs.verdict(0.90, (0.89, 0.91), False), "faster")
        self.assertEqual(bs.verdict(1.10, (1.08, 1.12), True), "faster")  # higher is better
        self.assertEqual(bs.verdict(0.95, (0.94, 0.96), True), "slower")
        self.assertEqual(bs.verdict(1.0, None, False), "same")
        self.assertEqual(bs.verdict(1.01, None, False), "slower")
        self.assertEqual(bs.verdict(None, None, False), "")


class TargetsFile(unittest.TestCase):
    def test_parse(self):
        t = bs.parse_targets(TARGETS)
        self.assertEqual(len(t.targets), 7)
        self.assertEqual(t.higher, {"bw_gbps"})
        self.assertEqual(t.plots, [("both", ["lat_us", "loopy_us"])])
        ab = t.targets[5]
        self.assertEqual(ab.terms, [("loopy_us", None), ("lat_us", "nvidia")])
        self.assertEqual((ab.stat, ab.op, ab.value, ab.runtime), ("p50", "<=", 1.15, "cudaev"))
        self.assertEqual(t.targets[0].describe(), "≤ 0.95×")
        self.assertEqual(t.targets[4].describe(), "p99 ≤ 12")

    def test_errors(self):
        bad = ["lat_us ratio =< 1", "lat_us ratio <= x", "a_us/b_us ratio <= 1", "lat_us ratio <= 1 cudaev",
               "lat_us p50 <= 1 amd", "lat_us pxx <= 1", "higher", "Lat-us p50 <= 1", "a/b/c p50 <= 1",
               "higher bw_gbps\nbw_gbps ratio <= 1", "lat_us ratio >= 1", "lat_us p50 <= 1 cudaev extra"]
        for text in bad:
            with self.assertRaises(ValueError, msg=text):
                bs.parse_targets(text)

    def test_repository_targets_parse(self):
        with open(os.path.join(HERE, "targets.txt")) as f:
            t = bs.parse_targets(f.read())
        names = {m for tg in t.targets for m, _ in tg.terms}
        for m in ("launch_enqueue_us", "launch_enqueue_batch_us", "launch_sync_rtt_us", "bw_h2d_pinned_gbps", "malloc_async_free_async_us",
                  "loop_cb_latency_us", "loop_completions_per_s", "loop_idle_cpu_pct"):
            self.assertIn(m, names)
        launch = [tg for tg in t.targets if tg.terms == [("launch_enqueue_batch_us", None)]][0]
        self.assertEqual((launch.stat, launch.op, launch.value), ("ratio", "<=", 0.95))
        sustained = [tg for tg in t.targets if tg.terms == [("launch_enqueue_us", None)]][0]
        self.assertEqual((sustained.stat, sustained.op, sustained.value), ("ratio", "<=", 1.0))


class Analysis(unittest.TestCase):
    """Synthetic runs through benchstat.analyze."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="benchstat-test.")
        self.nv = self.fake_lib("nvidia")
        self.ours = self.fake_lib("cudaev")
        self.lines = []

    def tearDown(self):
        shutil.rmtree(self.dir)

    def fake_lib(self, name):
        d = os.path.join(self.dir, name)
        os.makedirs(d)
        p = os.path.join(d, "libcudart.so.13")
        with open(p, "w") as f:
            f.write(name)
        return p

    def add_run(self, prog, rt, rnd, out, rc=0, err="", mapped=None):
        base = os.path.join(self.dir, "%s.%s.%d" % (prog, rt, rnd))
        lib = self.nv if rt == "nvidia" else self.ours
        with open(base + ".out", "w") as f:
            f.write(out)
        with open(base + ".err", "w") as f:
            f.write("cudart %s\n%s" % (mapped or lib, err))
        self.lines.append("\t".join([prog, rt, str(rnd), str(rc), "1.0", base + ".out", base + ".err", lib]))

    def analyze(self):
        runs = os.path.join(self.dir, "runs.tsv")
        with open(runs, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        targets = os.path.join(self.dir, "targets.txt")
        with open(targets, "w") as f:
            f.write(TARGETS)
        out = os.path.join(self.dir, "out")
        with contextlib.redirect_stdout(io.StringIO()):
            rc = bs.analyze(runs, targets, out, plots="none")
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(out, "table.md")) as f:
            table = f.read()
        return rc, summary, table, out

    def test_end_to_end(self):
        # lat_us: NVIDIA 10 (+ an outlier per round), cudaev 9: ratio 0.9, faster, PASS <= 0.95.
        # slow_us: cudaev 20% slower every round: FAIL.  bw_gbps: 100 vs 98 (higher): ratio 0.98 < 0.99: FAIL.
        # noisy_us: per-round ratios 0.9, 1.0, 1.1 -> pooled ratio 1.0, 'same', PASS (noisy).
        # loopy_us: cudaev only, 11 -> 11 / NVIDIA lat 10 = 1.1 <= 1.15: PASS.
        noisy = {1: (10.0, 9.0), 2: (10.0, 10.0), 3: (10.0, 11.0)}
        for rnd in (1, 2, 3):
            self.add_run("p", "nvidia", rnd, protocol({
                "lat_us": [10.0] * 99 + [50.0], "slow_us": [5.0] * 10, "bw_gbps": [100.0] * 5,
                "noisy_us": [noisy[rnd][0]] * 5}))
            self.add_run("p", "cudaev", rnd, protocol({
                "lat_us": [9.0] * 100, "slow_us": [6.0] * 10, "bw_gbps": [98.0] * 5,
                "noisy_us": [noisy[rnd][1]] * 5}))
            self.add_run("loop", "cudaev", rnd, protocol({"loopy_us": [11.0] * 7}))
        rc, summary, table, out = self.analyze()
        self.assertEqual(rc, 1)  # slow_us and bw_gbps fail, absent_us missing
        m = {s["metric"]: s for s in summary["metrics"]}
        lat = m["lat_us"]
        self.assertEqual(lat["nvidia"]["n"], 300)
        self.assertEqual(lat["nvidia"]["p50"], 10.0)
        # 297 x 10 then 3 x 50: p99 sits at index 296.01, 1% of the way from 10 to 50.
        self.assertAlmostEqual(lat["nvidia"]["p99"], 10.4)
        self.assertEqual(lat["cudaev"]["p50"], 9.0)
        self.assertAlmostEqual(lat["ratio"], 0.9)
        self.assertEqual(lat["spread"], [0.9, 0.9])
        self.assertEqual(lat["verdict"], "faster")
        self.assertAlmostEqual(m["slow_us"]["ratio"], 1.2)
        self.assertEqual(m["slow_us"]["verdict"], "slower")
        self.assertAlmostEqual(m["bw_gbps"]["ratio"], 0.98)
        self.assertEqual(m["bw_gbps"]["verdict"], "slower")
        self.assertTrue(m["bw_gbps"]["higher_is_better"])
        self.assertAlmostEqual(m["noisy_us"]["ratio"], 1.0)
        self.assertEqual([round(x, 6) for x in m["noisy_us"]["round_ratios"]], [0.9, 1.0, 1.1])
        self.assertEqual(m["noisy_us"]["verdict"], "same")
        self.assertEqual(m["loopy_us"]["nvidia"]["n"], 0)

        t = {(e["lhs"], e["stat"]): e for e in summary["targets"]}
        self.assertEqual(t[("lat_us", "ratio")]["result"], "PASS")
        self.assertEqual(t[("slow_us", "ratio")]["result"], "FAIL")
        self.assertEqual(t[("bw_gbps", "ratio")]["result"], "FAIL")
        self.assertEqual(t[("noisy_us", "ratio")]["result"], "PASS (noisy)")
        p99 = t[("lat_us", "p99")]
        self.assertEqual(p99["value"], 9.0)
        self.assertEqual(p99["result"], "PASS")
        ab = t[("loopy_us/lat_us@nvidia", "p50")]
        self.assertAlmostEqual(ab["value"], 1.1)
        self.assertEqual(ab["spread"], [1.1, 1.1])
        self.assertEqual(ab["result"], "PASS")
        self.assertEqual(t[("absent_us", "p50")]["result"], "MISSING")

        self.assertIn("| lat_us | us | 10.00 / 10.40 | 9.000 / 9.000 |", table)
        self.assertIn("| 0.900 (0.900–0.900) faster | ≤ 0.95×; p99 ≤ 12 | PASS; PASS (9.000) |", table)
        self.assertIn("| bw_gbps | GB/s ↑ |", table)
        self.assertIn("| absent_us | — | not measured | not measured |", table)
        self.assertIn("| loopy_us/lat_us@nvidia (p50 of cudaev) | ratio | — | 1.100 | 1.100 (1.100–1.100) |", table)
        with gzip.open(os.path.join(out, "samples.csv.gz"), "rt") as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "runtime,round,program,metric,value")
        self.assertEqual(len(rows) - 1, 3 * (2 * (100 + 10 + 5 + 5) + 7))
        self.assertIn("nvidia,1,p,lat_us,50", rows)

    def test_failures(self):
        # cudaev fails in round 2 inside bench b2 (b1's samples still count),
        # maps the wrong library in round 3; the missing-end bench's samples are dropped.
        for rnd in (1, 2, 3):
            self.add_run("p", "nvidia", rnd, protocol({"lat_us": [10.0] * 5}, bench="b1") +
                         protocol({"slow_us": [5.0] * 5}, bench="b2"))
        self.add_run("p", "cudaev", 1, protocol({"lat_us": [9.0] * 5}, bench="b1") +
                     protocol({"slow_us": [5.0] * 5}, bench="b2"))
        self.add_run("p", "cudaev", 2, protocol({"lat_us": [9.0] * 5}, bench="b1") +
                     protocol({"slow_us": [1.0] * 5}, bench="b2", end=False), rc=1,
                     err="bench: x.cu:3: cudaMalloc(&p, 1) failed: cudaErrorNotSupported (operation not supported)\n")
        self.add_run("p", "cudaev", 3, protocol({"lat_us": [1.0] * 5}, bench="b1"), mapped=self.nv)
        rc, summary, table, _ = self.analyze()
        self.assertEqual(rc, 1)
        m = {s["metric"]: s for s in summary["metrics"]}
        self.assertEqual(m["lat_us"]["cudaev"]["n"], 10)  # rounds 1 and 2; round 3 mapped NVIDIA's library
        self.assertEqual(m["lat_us"]["cudaev"]["p50"], 9.0)
        self.assertEqual(m["slow_us"]["cudaev"]["n"], 5)  # round 2's unfinished b2 dropped
        self.assertEqual(m["slow_us"]["cudaev"]["p50"], 5.0)
        runs = {(r["runtime"], r["round"]): r for r in summary["runs"]}
        self.assertIn("exit 1 in b2: bench: x.cu:3: cudaMalloc(&p, 1) failed: cudaErrorNotSupported",
                      runs[("cudaev", 2)]["error"])
        self.assertTrue(runs[("cudaev", 3)]["error"].startswith("wrong libcudart: mapped "))
        t = {(e["lhs"], e["stat"]): e for e in summary["targets"]}
        self.assertEqual(t[("lat_us", "ratio")]["result"], "ERROR")  # round 3 failed for lat_us
        self.assertEqual(t[("slow_us", "ratio")]["result"], "ERROR")
        self.assertIn("(2 failed runs)", table)

    def test_program_that_never_ran(self):
        for rnd in (1, 2):
            self.add_run("p", "nvidia", rnd, protocol({"lat_us": [10.0] * 3}))
            self.add_run("p", "cudaev", rnd, protocol({"lat_us": [9.0] * 3}))
            self.add_run("loop", "cudaev", rnd, "", rc=1, err="bench: cudaev_loop_create failed\n")
        rc, summary, table, _ = self.analyze()
        t = {(e["lhs"], e["stat"]): e for e in summary["targets"]}
        self.assertEqual(t[("lat_us", "ratio")]["result"], "PASS")
        # absent_us may belong to the silent program 'loop': ERROR, not MISSING.
        self.assertEqual(t[("absent_us", "p50")]["result"], "ERROR")
        self.assertIn("cudaev_loop_create failed", t[("absent_us", "p50")]["errors"][0])


def make_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


FAKE = r"""#!/usr/bin/env bash
# Fake benchmark: knows its runtime from the first LD_LIBRARY_PATH entry.
first=${LD_LIBRARY_PATH%%:*}
case $first in */nvidia) rt=nvidia ;; *) rt=cudaev ;; esac
name=$(basename "$0")
echo "$name $rt" >>"$FAKE_LOG"
mapped=$first/libcudart.so.13
[ "$name" = bench-wrongmap ] && [ $rt = cudaev ] && mapped=$FAKE_NVIDIA_DIR/libcudart.so.13
echo "cudart $mapped" >&2
case $name in
  bench-lat)
    v=10; [ $rt = cudaev ] && v=9
    echo "bench lat"; echo "unit lat_us us"
    for i in 1 2 3 4 5 6 7 8 9 10; do echo "sample lat_us $v"; done
    echo "end lat 0.01" ;;
  bench-fail)
    echo "bench slow"; echo "unit slow_us us"; echo "sample slow_us 1"
    if [ $rt = cudaev ]; then
      echo "bench: fake.cu:1: cudaStreamCreate(&s) failed: cudaErrorNotSupported (operation not supported)" >&2
      exit 1
    fi
    echo "end slow 0.01" ;;
  bench-wrongmap)
    echo "unit bw_gbps GB/s"; echo "sample bw_gbps 100" ;;
  loop_fake)
    echo "unit loopy_us us"; echo "sample loopy_us 11" ;;
  bench-hang)
    echo "unit hang_us us"; echo "sample hang_us 1"
    [ $rt = cudaev ] && sleep 10 ;;
esac
exit 0
"""


class RunScript(unittest.TestCase):
    """bench/run.sh end to end on fake programs."""

    def test_run_sh(self):
        d = tempfile.mkdtemp(prefix="benchrun-test.")
        try:
            build = os.path.join(d, "build")
            nvdir = os.path.join(d, "nvidia")
            os.makedirs(os.path.join(build, "bench"))
            os.makedirs(nvdir)
            for lib in (os.path.join(build, "libcudart.so.13"), os.path.join(nvdir, "libcudart.so.13")):
                with open(lib, "w") as f:
                    f.write("fake\n")
            progs = [("bench-lat", "both"), ("bench-fail", "both"), ("bench-wrongmap", "both"),
                     ("loop_fake", "cudaev"), ("bench-hang", "both")]
            with open(os.path.join(build, "bench", "programs.txt"), "w") as f:
                f.write("# comment\n" + "".join("%s %s\n" % p for p in progs))
            for name, _ in progs:
                make_exec(os.path.join(build, "bench", name), FAKE)
            log = os.path.join(d, "log")
            env = dict(os.environ, CUDAEV_BUILD_DIR=build, CUDAEV_NVIDIA_CUDART=os.path.join(nvdir, "libcudart.so.13"),
                       BENCH_ROUNDS="2", BENCH_TARGETS=os.path.join(d, "targets.txt"), BENCH_PLOTS="none", BENCH_TIMEOUT="1",
                       FAKE_LOG=log, FAKE_NVIDIA_DIR=nvdir, LD_LIBRARY_PATH="/keep/me")
            with open(env["BENCH_TARGETS"], "w") as f:
                f.write(TARGETS)
            out = os.path.join(d, "out")
            res = subprocess.run(["bash", os.path.join(HERE, "run.sh"), out], env=env, capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
            with open(log) as f:
                order = f.read().split("\n")
            self.assertEqual(order[:4], ["bench-lat nvidia", "bench-lat cudaev", "bench-fail nvidia",
                                         "bench-fail cudaev"])
            self.assertIn("loop_fake cudaev", order)
            self.assertNotIn("loop_fake nvidia", order)  # cudaev-only program
            self.assertEqual(order.count("bench-hang cudaev"), 1)  # timed out, then skipped
            self.assertEqual(order.count("bench-hang nvidia"), 2)
            round2 = order[9:]
            self.assertEqual(round2[:2], ["bench-lat cudaev", "bench-lat nvidia"])  # alternated
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
            t = {(e["lhs"], e["stat"]): e for e in summary["targets"]}
            self.assertEqual(t[("lat_us", "ratio")]["result"], "PASS")
            self.assertAlmostEqual(t[("lat_us", "ratio")]["value"], 0.9)
            self.assertEqual(t[("slow_us", "ratio")]["result"], "ERROR")
            self.assertEqual(t[("bw_gbps", "ratio")]["result"], "ERROR")  # wrong library mapped
            self.assertAlmostEqual(t[("loopy_us/lat_us@nvidia", "p50")]["value"], 1.1)
            self.assertIn("| lat_us | us | 10.00 / 10.00 | 9.000 / 9.000 | 0.900 (0.900–0.900) faster |", res.stdout)
            self.assertIn("exit 1", res.stdout)
            self.assertIn("cudaErrorNotSupported", res.stdout)
            for name in ("table.md", "samples.csv.gz", "summary.json"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
            with open(os.path.join(out, "table.md")) as f:
                table = f.read()
            self.assertIn("wrong libcudart: mapped", table)
            self.assertIn("| bench-hang | cudaev | 1 | 124 |", table)
            self.assertIn("| bench-hang | cudaev | 2 | -1 | 0.0 | skipped: timed out in an earlier round |", table)
            self.assertIn("- command: bench/run.sh", table)

            # A program that does not exist -> harness error, exit 2.
            os.remove(os.path.join(build, "bench", "loop_fake"))
            res = subprocess.run(["bash", os.path.join(HERE, "run.sh"), out], env=env, capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(res.returncode, 2)
            self.assertIn("loop_fake is missing", res.stderr)
        finally:
            shutil.rmtree(d)


class Plots(unittest.TestCase):
    def test_backends(self):
        t = bs.parse_targets(TARGETS)
        runs = []
        for rt, v in (("nvidia", 10.0), ("cudaev", 9.0)):
            r = bs.Run("p", rt, 1, 0, 1.0, "", "", "")
            r.samples = {"lat_us": [v + i / 100.0 for i in range(300)], "bw_gbps": [50.0 + i for i in range(5)]}
            r.units = {"lat_us": "us", "bw_gbps": "GB/s"}
            runs.append(r)
        data = bs.Data(runs)
        plans = bs.plan_plots(data, t)
        self.assertEqual([p[0] for p in plans], ["cdf.png", "both.png"])
        self.assertEqual(len(plans[0][2]), 2)  # one panel per metric
        tried = 0
        for backend in ("matplotlib", "gnuplot", "plain"):
            d = tempfile.mkdtemp(prefix="benchplot-test.")
            try:
                paths, note = bs.make_plots(data, t, d, backend)
                if not paths:
                    continue  # backend not installed here
                tried += 1
                self.assertTrue(note.startswith(backend), note)
                for p in paths:
                    with open(p, "rb") as f:
                        self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            finally:
                shutil.rmtree(d)
        if tried == 0:
            self.fail("no plot backend worked, not even the plain one")


if __name__ == "__main__":
    unittest.main(verbosity=2)
