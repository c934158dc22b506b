"""The decode loop's counters for GET /metrics (Prometheus text 0.0.4):
decode_tokens_total, decode_steps_total, decode_step_seconds (histogram:
from a step's enqueue to its event awaited), decode_step_batch (histogram:
sequences per step), decode_active_sequences, decode_waiting_sequences,
decode_sequences_total{reason} (how sequences ended) and
decode_requests_total{code} (answers to POST /v1/generate).

Thread: the event loop's thread only.
"""


from metrics import Hist as _Hist  # the service's histogram


class DecodeMetrics:
    def __init__(self, max_batch):
        self.tokens = 0
        self.steps = 0
        self.active = 0
        self.waiting = 0
        self.ended = {}
        self.requests = {}
        self.step_s = _Hist("decode_step_seconds",
                            "Time of one decode step, from its enqueue to its event awaited.",
                            (50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
                             50e-3, 100e-3, 250e-3))
        sizes, s = [], 1
        while s < max_batch:
            sizes.append(s)
            s *= 2
        self.batch = _Hist("decode_step_batch", "Sequences in one decode step.",
                           sizes + [max_batch])

    def step(self, seconds, batch):
        self.steps += 1
        self.step_s.observe(seconds)
        self.batch.observe(batch)

    def finished(self, reason):
        key = reason if not reason.startswith("error") else "error"
        self.ended[key] = self.ended.get(key, 0) + 1

    def request(self, code):
        self.requests[code] = self.requests.get(code, 0) + 1

    def render(self):
        o = ["# HELP decode_tokens_total Tokens generated and handed to their streams.\n"
             f"# TYPE decode_tokens_total counter\ndecode_tokens_total {self.tokens}\n"
             "# HELP decode_steps_total Decode steps run (each one batch).\n"
             f"# TYPE decode_steps_total counter\ndecode_steps_total {self.steps}\n"
             "# HELP decode_active_sequences Sequences in the running batch.\n"
             "# TYPE decode_active_sequences gauge\n"
             f"decode_active_sequences {self.active}\n"
             "# HELP decode_waiting_sequences Sequences waiting for a KV-cache slot.\n"
             "# TYPE decode_waiting_sequences gauge\n"
             f"decode_waiting_sequences {self.waiting}\n"
             "# HELP decode_sequences_total Sequences ended, by reason.\n"
             "# TYPE decode_sequences_total counter\n"]
        for r, v in sorted(self.ended.items()):
            o.append(f'decode_sequences_total{{reason="{r}"}} {v}\n')
        o.append("# HELP decode_requests_total Answers to POST /v1/generate, by HTTP status.\n"
                 "# TYPE decode_requests_total counter\n")
        for c, v in sorted(self.requests.items()):
            o.append(f'decode_requests_total{{code="{c}"}} {v}\n')
        self.step_s.render(o)
        self.batch.render(o)
        return "".join(o)
