#!/usr/bin/env python3
"""CPU test of bench/serve_py_report.py: rounds merged into medians and
spreads, the C servers' own table round by round (a bad round's wrk p99
beside its server-side p99s and the machine's busy and stolen cores), and
the targets' verdicts on known numbers."""
import csv
import io
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_py_report as rep  # noqa: E402

HEADER = ("server,connections,rps,p50_ms,p99_ms,p999_ms,max_ms,errors,cpu_cores,threads,requests,"
          "server_p99_ms,socket_p99_ms,send_p99_ms,machine_cores,steal_cores")
ROWS = [
    # three rounds of the C service at 256 connections, the second one bad
    "async,256,290000,0.8,1.9,30,40,0,3.9,7,1000,2.5,1,0.5,9.1,0.00",
    "async,256,250000,0.9,19.7,60,70,0,3.9,7,1000,2.5,2.5,0.5,10.5,0.75",
    "async,256,270000,0.9,1.8,25,50,0,4.0,7,1000,1,1,0.5,9.0,0.00",
    # the Python service and its twins, one round each, at 1 and 16
    "py-cudaev,1,1400,0.70,1.0,2,3,0,0.7,20,100,,,,1.0,0",
    "py-executor,1,1200,0.80,1.1,2,3,0,0.8,20,100,,,,1.0,0",
    "py-poll,1,1300,0.75,1.0,2,3,0,0.8,20,100,,,,1.0,0",
    "py-cudaev,16,10000,1.3,3.0,5,6,0,4.0,20,100,,,,5.0,0",
    "py-executor,16,6600,2.3,4.0,5,6,0,4.0,20,100,,,,5.0,0",
    "py-poll,16,8500,1.8,3.5,5,6,0,4.0,20,100,,,,5.0,0",
]


def rows():
    return rep.merge_rounds(list(csv.DictReader(io.StringIO("\n".join([HEADER] + ROWS)))))


class Report(unittest.TestCase):
    def test_rounds_merge_into_medians_with_the_rounds_kept(self):
        a = next(r for r in rows() if r["server"] == "async")
        self.assertEqual(a["rounds"], 3)
        self.assertEqual(a["rps"], "270000")
        self.assertEqual(a["p99_ms"], "1.9")
        self.assertEqual(a["p99_ms_all"], [1.9, 19.7, 1.8])
        self.assertEqual(a["steal_cores_rounds"], [0.0, 0.75, 0.0])

    def test_verdicts(self):
        vs = dict((t.split(":")[1].strip(), ok) for ok, t in rep.verdicts(rows())
                  if t.startswith("py-cudaev: p50"))
        self.assertEqual(vs, {"p50 at 1 connections": False,  # 0.70 / 0.80 = 0.875
                              "p50 at 16 connections": True})  # 1.3 / 2.3 = 0.57

    def test_the_own_table_reads_round_by_round(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "serve_py.csv")
            with open(path, "w") as f:
                f.write("\n".join([HEADER] + ROWS) + "\n")
            r = subprocess.run([sys.executable, os.path.join(HERE, "serve_py_report.py"), path, d],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            with open(os.path.join(d, "serve_py.md")) as f:
                md = f.read()
        self.assertEqual(r.returncode, 1, r.stdout)  # a target fails: exit 1
        self.assertIn("| async | 256 | 1.9 / 19.7 / 1.8 | 2.5 / 2.5 / 1 | 1 / 2.5 / 1 | "
                      "0.5 / 0.5 / 0.5 | 9.1 / 10.5 / 9 | 0 / 0.75 / 0 |", md)
        self.assertIn("| async | 256 | 270,000 (250,000..290,000) |", md)
        self.assertIn("All targets: FAIL", md)


if __name__ == "__main__":
    unittest.main()
