#!/usr/bin/env python3
"""CPU test of bench/decode_trace.py's analysis: a synthetic trace whose
steps, reader calls and parts have known times."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_trace as dt  # noqa: E402

US = 1000


def synthetic(n_steps, batch, via_timer):
    """Steps 1 ms apart: the wait called at 0, the GPU done at 200 us, the
    engine resumed 10 us later (the timer's reader seeing it at 205 us, or
    the eventfd's at 205 us), then 100 us of parts (enqueue 60, _deliver
    30) before the next call at 400 us."""
    steps, readers, parts = [], [], []
    for i in range(n_steps):
        t = i * 1000 * US
        steps.append({"n": batch, "call": t, "gpu_done": t + 200 * US, "resume": t + 210 * US,
                      "loop": {"passes": 3, "wakeups": 0, "gpu_wakeups_armed": 1,
                               "spin_ns": 5000}})
        readers.append(("timer", t + 180 * US, t + 190 * US))  # before the GPU finished
        readers.append(("timer" if via_timer else "fd", t + 205 * US, t + 207 * US))
        parts.append(("_deliver", t + 220 * US, t + 250 * US))
        parts.append(("enqueue", t + 300 * US, t + 360 * US))
    # the next call is 1 ms after the previous one: between = 1000 - 210 = 790 us
    return {"steps": steps, "readers": readers, "parts": parts}


class Analysis(unittest.TestCase):
    def test_known_times(self):
        rows = dt.summary(dt.pool([dt.analyze_one(synthetic(100, 16, True))]))
        r = rows[16]
        self.assertEqual(r["steps"], 100 - dt.WARMUP_STEPS)
        self.assertAlmostEqual(r["gpu_after_call_p50"], 200.0)
        self.assertAlmostEqual(r["resume_p50"], 10.0)
        self.assertAlmostEqual(r["between_p50"], 790.0)
        p = r["parts_p50"]
        self.assertAlmostEqual(p["_deliver"], 30.0)
        self.assertAlmostEqual(p["enqueue"], 60.0)
        self.assertAlmostEqual(p["other"], 700.0)
        self.assertEqual(r["via"], {"timer": 1.0})
        self.assertAlmostEqual(r["readers_per_step"], 2.0)
        self.assertAlmostEqual(r["passes_per_step"], 3.0)

    def test_which_reader_saw_it_and_pooling(self):
        a = dt.analyze_one(synthetic(60, 1, False))
        b = dt.analyze_one(synthetic(60, 1, True))
        r = dt.summary(dt.pool([a, b]))[1]
        self.assertEqual(r["steps"], 2 * (60 - dt.WARMUP_STEPS))
        self.assertEqual(r["via"], {"fd": 0.5, "timer": 0.5})
        self.assertEqual(len(r["between_p50_each"]), 2)

    def test_a_batch_change_ends_the_between_window(self):
        t = synthetic(50, 4, True)
        last = t["steps"][-1]
        t["steps"].append(dict(last, n=8, call=last["call"] + 1000 * US,
                               gpu_done=last["gpu_done"] + 1000 * US,
                               resume=last["resume"] + 1000 * US))
        g = dt.analyze_one(t)
        # the last batch-4 step has no batch-4 successor: no between window for it
        self.assertEqual(len(g[4]["between"]), 50 - dt.WARMUP_STEPS - 1)
        self.assertNotIn(8, g)  # its one step is within the warm-up

    def test_counters_per_span(self):
        # counters [instructions, cycles, cpu ns, voluntary, involuntary]:
        # a million instructions a step at 2 cycles each and on the CPU for a
        # ns each; the wait takes 1000 of them and switches once.
        t = synthetic(60, 2, True)
        for i, s in enumerate(t["steps"]):
            base = i * 10**6
            s["c_call"] = [base, 2 * base, base, i, 0]
            s["c_resume"] = [base + 1000, 2 * base + 2000, base + 1000, i + 1, 0]
        t["parts"] = [p + (60_000, 120_000, 60 * US, 0, 0) if p[0] == "enqueue"
                      else p + (-1, -1, 30 * US, 0, 1) for p in t["parts"]]
        r = dt.summary(dt.pool([dt.analyze_one(t)]))[2]["counters"]
        self.assertEqual(r["wait"]["instr"], 1000)
        self.assertAlmostEqual(r["wait"]["cpu"], 1000 / (210 * US))
        self.assertEqual(r["wait"]["csw"], 1)
        self.assertAlmostEqual(r["between"]["instr"], 10**6 - 1000)
        self.assertAlmostEqual(r["between"]["ipc"], 0.5)
        self.assertAlmostEqual(r["between"]["cpu"], (10**6 - 1000) / (790 * US))
        self.assertAlmostEqual(r["enqueue"]["instr"], 60_000)
        self.assertAlmostEqual(r["enqueue"]["cpu"], 1.0)
        self.assertIsNone(r["_deliver"]["instr"])  # -1: not counted
        self.assertIsNone(r["_deliver"]["ipc"])
        self.assertAlmostEqual(r["_deliver"]["csw"], 1)
        md = dt.report({"cudaev": dt.summary(dt.pool([dt.analyze_one(t)]))})
        self.assertIn("| cudaev | 2 | 1 k / 0.50 / 0.00; 1.00 | 999 k / 0.50 / 1.26; 0.00 |", md)

    def test_cpu_moves(self):
        # every wait called on CPU 3; odd steps resume on CPU 5
        t = synthetic(60, 2, True)
        for i, s in enumerate(t["steps"]):
            s["c_call"] = [-1, -1, i * 10**6, 0, 0, 3]
            s["c_resume"] = [-1, -1, i * 10**6 + 1000, 0, 0, 5 if i % 2 else 3]
        r = dt.summary(dt.pool([dt.analyze_one(t)]))[2]
        self.assertAlmostEqual(r["counters"]["wait"]["moved"], 0.5)
        self.assertAlmostEqual(r["counters"]["between"]["moved"], 19 / 39)  # the odd of steps 20..58
        self.assertEqual(r["cpus_each"], [(2, 0.5)])
        self.assertIsNone(r["counters"]["wait"]["instr"])

    def test_report_has_a_row_per_mode_and_batch(self):
        table = {"cudaev": dt.summary(dt.pool([dt.analyze_one(synthetic(40, 1, True))])),
                 "poll": dt.summary(dt.pool([dt.analyze_one(synthetic(40, 1, True))]))}
        md = dt.report(table).split("\n\n")[0]  # the first table
        self.assertEqual(sum(1 for line in md.splitlines() if line.startswith("| cudaev | 1 |")), 1)
        self.assertIn("| poll | 1 | 20 | 200 |", md)


if __name__ == "__main__":
    unittest.main()
