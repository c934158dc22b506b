"""Counters and histograms behind GET /metrics, in Prometheus text (0.0.4),
with the C service's names where they mean the same
(examples/inference_server/metrics.h): infer_requests_total{code},
infer_other_requests_total{path,code}, infer_http_timeouts_total{phase},
infer_request_duration_seconds, infer_batch_size, infer_gpu_batch_seconds,
infer_batch_rows_total, infer_gpu_seconds_total, infer_device_resets_total,
infer_queue_depth, infer_inflight_batches, infer_active_requests, process_*.
Added here: infer_worker (this worker's index), infer_workers, infer_wait_mode
and infer_process_restarts_total (workers the master started again after a
device fault). Each worker process keeps its own: a scrape answers for the
worker that accepted its connection.

Thread: the event loop's thread only (the worker threads of the CPU device
report through the loop).
"""
import os
import resource

CODES = (200, 400, 404, 405, 408, 413, 415, 500, 503, 504)
PATHS = ("/v1/infer", "/health", "/metrics", "other")
PHASES = ("headers", "body")


def _g9(v):
    return "%.9g" % v


class Hist:
    def __init__(self, name, help_, bounds):
        self.name, self.help, self.bounds = name, help_, list(bounds)
        self.buckets = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v):
        i = 0
        while i < len(self.bounds) and v > self.bounds[i]:
            i += 1
        self.buckets[i] += 1
        self.sum += v
        self.count += 1

    def render(self, out):
        out.append(f"# HELP {self.name} {self.help}\n# TYPE {self.name} histogram\n")
        cum = 0
        for i, n in enumerate(self.buckets):
            cum += n
            le = _g9(self.bounds[i]) if i < len(self.bounds) else "+Inf"
            out.append(f'{self.name}_bucket{{le="{le}"}} {cum}\n')
        out.append(f"{self.name}_sum {_g9(self.sum)}\n{self.name}_count {self.count}\n")


def _code_label(code):
    return str(code) if code in CODES else "other"


class Metrics:
    def __init__(self, max_batch, worker=0, workers=1, wait_mode="", restarts=0):
        self.requests = {str(c): 0 for c in CODES + ("other",)}
        self.other = {}
        self.timeouts = {p: 0 for p in PHASES}
        sizes, s = [], 1
        while s < max_batch:
            sizes.append(s)
            s *= 2
        sizes.append(max_batch)
        self.latency = Hist("infer_request_duration_seconds",
                            "Time from an inference request's arrival (its headers read) to its "
                            "answer being ready.",
                            (100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
                             100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10))
        self.batch = Hist("infer_batch_size", "Requests per batch sent to a device.", sizes)
        self.gpu = Hist("infer_gpu_batch_seconds",
                        "Device time of one batch (copies in, the MLP, copy out).",
                        (10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
                         25e-3, 100e-3))
        self.batch_rows = 0
        self.gpu_seconds = 0.0
        self.device_resets = 0
        self.queue_depth = 0
        self.inflight_batches = 0
        self.active_requests = 0
        self.worker, self.workers, self.wait_mode = worker, workers, wait_mode
        self.restarts = restarts

    def request(self, code, latency_s):
        """An answer with ``code`` to an inference request."""
        self.requests[_code_label(code)] += 1
        self.latency.observe(latency_s)

    def other_request(self, path, code):
        """An answer to anything else; ``path`` is one of PATHS."""
        key = (path if path in PATHS else "other", _code_label(code))
        self.other[key] = self.other.get(key, 0) + 1

    def timeout(self, phase):
        self.timeouts[phase] += 1

    def batch_done(self, rows, gpu_s):
        self.batch.observe(rows)
        self.gpu.observe(gpu_s)
        self.batch_rows += rows
        self.gpu_seconds += gpu_s

    def render(self):
        o = ["# HELP infer_requests_total Answers to inference requests (POST /v1/infer), by "
             "HTTP status code.\n# TYPE infer_requests_total counter\n"]
        for c, v in self.requests.items():
            o.append(f'infer_requests_total{{code="{c}"}} {v}\n')
        o.append("# HELP infer_other_requests_total Answers to every request that is not an "
                 "inference (health checks, scrapes, unknown paths, wrong methods), by path and "
                 "HTTP status code.\n# TYPE infer_other_requests_total counter\n")
        for p in PATHS:
            for c in CODES + ("other",):
                v = self.other.get((p, str(c)), 0)
                if v:
                    o.append(f'infer_other_requests_total{{path="{p}",code="{c}"}} {v}\n')
        o.append("# HELP infer_http_timeouts_total Connections cut because the client did not "
                 "complete its request's headers or body within their deadline.\n"
                 "# TYPE infer_http_timeouts_total counter\n")
        for p, v in self.timeouts.items():
            o.append(f'infer_http_timeouts_total{{phase="{p}"}} {v}\n')
        for h in (self.latency, self.batch, self.gpu):
            h.render(o)
        o.append("# TYPE infer_batch_rows_total counter\n"
                 f"infer_batch_rows_total {self.batch_rows}\n"
                 f"# TYPE infer_gpu_seconds_total counter\n"
                 f"infer_gpu_seconds_total {_g9(self.gpu_seconds)}\n"
                 f"# TYPE infer_device_resets_total counter\n"
                 f"infer_device_resets_total {self.device_resets}\n"
                 "# HELP infer_queue_depth Requests waiting for a batch.\n"
                 f"# TYPE infer_queue_depth gauge\ninfer_queue_depth {self.queue_depth}\n"
                 "# TYPE infer_inflight_batches gauge\n"
                 f"infer_inflight_batches {self.inflight_batches}\n"
                 "# HELP infer_active_requests Requests received and not yet finished.\n"
                 "# TYPE infer_active_requests gauge\n"
                 f"infer_active_requests {self.active_requests}\n"
                 "# HELP infer_process_restarts_total Workers started again after a device "
                 "fault their reset could not clear.\n"
                 "# TYPE infer_process_restarts_total counter\n"
                 f"infer_process_restarts_total {self.restarts}\n"
                 "# HELP infer_worker The index of the worker process that answered.\n"
                 f"# TYPE infer_worker gauge\ninfer_worker {self.worker}\n"
                 f"# TYPE infer_workers gauge\ninfer_workers {self.workers}\n"
                 "# HELP infer_wait_mode How batches are awaited (--wait).\n"
                 f'# TYPE infer_wait_mode gauge\ninfer_wait_mode{{mode="{self.wait_mode}"}} 1\n')
        o.append(_process_lines())
        return "".join(o)


def _process_lines():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rss_kb = threads = -1
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
    except OSError:
        pass
    try:
        fds = len(os.listdir("/proc/self/fd")) - 1  # the directory's own fd
    except OSError:
        fds = -1
    return ("# TYPE process_cpu_seconds_total counter\n"
            f"process_cpu_seconds_total {ru.ru_utime + ru.ru_stime:.6f}\n"
            f"# TYPE process_threads gauge\nprocess_threads {threads}\n"
            f"# TYPE process_open_fds gauge\nprocess_open_fds {fds}\n"
            "# TYPE process_resident_memory_bytes gauge\n"
            f"process_resident_memory_bytes {rss_kb * 1024}\n")
