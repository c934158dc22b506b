#!/usr/bin/env python3
"""A service's Prometheus histograms between two scrapes of its /metrics
(text format 0.0.4, unlabelled metrics), for the load tests' rows.

  prom_hist.py BEFORE AFTER NAME...   prints, comma-separated, the p99 in ms
                                      of each histogram NAME over the interval
                                      ("" where the service has no such one)

p99 is the upper bound of the bucket holding the 99th percentile of the
observations made between the two scrapes (a histogram says no more).
bench/serve.sh and bench/serve_py.sh read the C service's
infer_request_duration_seconds (headers read to answer queued) and, with
--socket-timing, infer_socket_wait_seconds and infer_send_wait_seconds."""
import sys


def parse(text):
    """{sample name (labels kept): value} of Prometheus text; a name that
    occurs more than once (several workers' scrapes concatenated) is summed."""
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                pass
    return out


def load(path):
    """parse() of one scrape saved in a file; {} when the file is missing
    (the scrape failed)."""
    try:
        with open(path) as f:
            return parse(f.read())
    except OSError:
        return {}


def p99_ms(before, after, hist):
    """The p99 of histogram `hist` over the interval, in ms, as text ("" when
    absent or when nothing was observed)."""
    prefix = hist + '_bucket{le="'
    n = after.get(hist + "_count", 0) - before.get(hist + "_count", 0)
    if n <= 0:
        return ""
    buckets = []
    for k, v in after.items():
        if k.startswith(prefix) and k.endswith('"}') and "Inf" not in k:
            buckets.append((float(k[len(prefix):-2]), v - before.get(k, 0)))
    for le, cum in sorted(buckets):
        if cum >= 0.99 * n:
            return f"{le * 1e3:g}"
    return ""


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = load(argv[0]), load(argv[1])
    print(",".join(p99_ms(a, b, h) for h in argv[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
