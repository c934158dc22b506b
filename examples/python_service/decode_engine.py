"""Continuous batching: one asyncio task runs the decode steps of every
running sequence together.

A request becomes a :class:`Sequence` (``Engine.submit``) and waits in a
queue; at each step boundary the engine admits waiting sequences into free
KV-cache slots, removes the finished and the cancelled ones, and runs one
step for the batch: the model enqueues the work and hands back a step whose
event the engine awaits with ``wait_event`` (the ``--wait`` mode), then
gives each sequence that produced a token its token, through the sequence's
asyncio queue. A prompt is fed one token per step through the same batched
step (prefill and decode are one kind of step), so a joining sequence never
holds up the running ones for longer than one step.

With ``overlap`` (the default, as SGLang's overlap scheduler and vLLM's
async scheduling do) the engine enqueues step n+1 before it awaits step n:
a row whose input is step n's output reads it on the device (the backend's
``prev``), so the GPU goes from one step to the next while the engine
awaits, reads and delivers the last one. The engine's Python and its wait
then overlap the GPU's work instead of adding to it; without overlap each
step is enqueued only after the last one's tokens were delivered.

With nothing to run the task awaits an ``asyncio.Event`` that ``submit``
sets: an idle service uses no CPU.

Thread: every method runs on the event loop's thread; the model's work runs
wherever the backend puts it (the GPU, or the CPU backend's worker thread).
"""
import asyncio
import collections
import time

import numpy as np

END = None  # what a sequence's queue yields after its last token


class Busy(Exception):
    """The engine is draining or its waiting queue is full (HTTP 503)."""


class Sequence:
    """One request's generation. ``queue`` yields each token (an int) as the
    engine makes it, then END; ``finish_reason`` is set before END:
    "length" (max_tokens reached), "cancelled" or "drain" (stopped by a
    drain that ran out of time), or "error: ..." (the device failed).

    ``sink``, when its reader sets one, is offered each token first (on the
    engine's task, in step order): it returns True when it took the token
    (wrote it to the client), False to have it queued; a token is queued
    whenever the queue is not empty, so the two ways never reorder."""

    __slots__ = ("id", "prompt", "max_tokens", "queue", "sink", "slot", "pos", "fed", "row",
                 "generated", "cancelled", "finish_reason", "t_submit")

    def __init__(self, seq_id, prompt, max_tokens):
        self.id, self.prompt, self.max_tokens = seq_id, list(prompt), max_tokens
        self.queue = asyncio.Queue()
        self.sink = None
        self.slot = None
        self.pos = 0  # inputs whose step was delivered
        self.fed = 0  # inputs enqueued (pos, or pos + 1 while a step with it is in flight)
        self.row = 0  # its row in the last step enqueued with it
        self.generated = []
        self.cancelled = False
        self.finish_reason = None
        self.t_submit = time.monotonic()

    @property
    def steps(self):
        """Steps it needs: one per prompt token (the last one's output is
        the first token), then one per further token."""
        return len(self.prompt) + self.max_tokens - 1

    def next_input(self):
        """(token, prev): the input of its next step, or (0, row) when it is
        row ``row`` of the output of the step in flight (not read yet)."""
        if self.fed < len(self.prompt):
            return self.prompt[self.fed], -1
        if self.fed > self.pos:
            return 0, self.row
        return self.generated[-1], -1


class Engine:
    """``backend`` has ``max_batch``, ``max_len``, ``enqueue(tokens, prev,
    positions, slots) -> step`` (``step.event`` completes when the step is
    done; row i's input is ``tokens[i]``, or when ``prev[i] >= 0`` row
    ``prev[i]`` of the output of the step enqueued before, read on the
    device) and ``result(step, n) -> int64 [n]`` (the step's next tokens,
    once its event completed); ``wait`` is ``async wait(event)``;
    ``metrics`` a :class:`DecodeMetrics`; ``overlap``: enqueue the next step
    before awaiting the last (see the module)."""

    def __init__(self, backend, wait, metrics, max_waiting=1024, overlap=True):
        self.backend, self.wait, self.metrics = backend, wait, metrics
        self.max_waiting, self.overlap = max_waiting, overlap
        self.free_slots = list(range(backend.max_batch - 1, -1, -1))
        self.waiting = collections.deque()
        self.running = []
        self.draining = False
        self._wake = asyncio.Event()
        self._task = None
        self._next_id = 0
        self._stop = False

    def start(self):
        self._task = asyncio.get_running_loop().create_task(self._run(), name="decode-engine")

    def submit(self, prompt, max_tokens):
        """Queues a request; the caller reads ``seq.queue``. Raises
        :class:`Busy` while draining or when ``max_waiting`` wait already."""
        if self.draining or self._stop:
            raise Busy("draining")
        if len(self.waiting) >= self.max_waiting:
            raise Busy(f"{len(self.waiting)} requests already wait for a slot")
        seq = Sequence(self._next_id, prompt, max_tokens)
        self._next_id += 1
        self.waiting.append(seq)
        self._wake.set()
        return seq

    def cancel(self, seq):
        """Stops ``seq`` (its client left): it leaves at the next step
        boundary and its slot is freed there. Harmless once it ended."""
        if seq.finish_reason is None:
            seq.cancelled = True
            self._wake.set()

    @property
    def active(self):
        return len(self.running) + len(self.waiting)

    async def drain(self, timeout):
        """Admits nothing new; waits up to ``timeout`` seconds for every
        admitted and waiting sequence to finish, then stops the rest
        (finish_reason "drain") and the task. Returns how many were stopped."""
        self.draining = True
        deadline = time.monotonic() + timeout
        while self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stopped = self.active
        await self.close("drain")
        return stopped

    async def close(self, reason="drain"):
        """Ends every sequence with ``reason`` and stops the task (after the
        step in flight, if any, completes)."""
        self._stop = True
        self._wake.set()
        if self._task is not None:
            try:
                await self._task
            finally:
                self._task = None
        for seq in list(self.running) + list(self.waiting):
            self._finish(seq, reason)
        self.waiting.clear()

    def _finish(self, seq, reason):
        seq.finish_reason = reason
        seq.queue.put_nowait(END)
        if seq.slot is not None:
            self.free_slots.append(seq.slot)
            seq.slot = None
        self.metrics.finished(reason)

    def _boundary(self):
        """The step boundary: the cancelled leave, the waiting join."""
        keep = []
        for seq in self.running:
            if seq.cancelled:
                self._finish(seq, "cancelled")
            else:
                keep.append(seq)
        self.running = keep
        while self.waiting and self.free_slots:
            seq = self.waiting.popleft()
            if seq.cancelled:
                self._finish(seq, "cancelled")
                continue
            seq.slot = self.free_slots.pop()
            self.running.append(seq)
        while self.waiting and self.waiting[0].cancelled:
            self._finish(self.waiting.popleft(), "cancelled")
        self.metrics.active = len(self.running)
        self.metrics.waiting = len(self.waiting)

    def _launch(self, batch):
        """Enqueues one step for ``batch``; returns (batch, step, t0)."""
        rows = np.empty((4, len(batch)), np.int64)  # tokens, prev, positions, slots
        for i, seq in enumerate(batch):
            rows[0, i], rows[1, i] = seq.next_input()
            rows[2, i], rows[3, i] = seq.fed, seq.slot
            # Counted as fed now: if the enqueue fails, _fail ends them all.
            seq.fed += 1
            seq.row = i
        t0 = time.monotonic()
        return batch, self.backend.enqueue(*rows), t0

    def _fail(self, e):
        """The device failed a step: every running sequence ends."""
        reason = f"error: {type(e).__name__}: {e}".splitlines()[0]
        for seq in self.running:
            self._finish(seq, reason)
        self.running = []

    async def _run(self):
        inflight = None  # (batch, step, t0): enqueued, its tokens not delivered
        while not self._stop:
            self._boundary()
            nxt = None
            if inflight is None or self.overlap:
                batch = [s for s in self.running if s.fed < s.steps]
                if batch:
                    try:
                        nxt = self._launch(batch)
                    except Exception as e:  # the launch itself failed
                        self._fail(e)
                        inflight = None
                        continue
            if inflight is None:
                if nxt is None:
                    self._wake.clear()
                    if not self.waiting:
                        await self._wake.wait()
                    continue
                inflight, nxt = nxt, None
                if self.overlap:
                    continue  # the next step goes in behind it before the wait
            batch, step, t0 = inflight
            try:
                await self.wait(step.event)
                out = self.backend.result(step, len(batch))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the device failed the step (and the one behind it)
                self._fail(e)
                inflight = None
                continue
            self.metrics.step(time.monotonic() - t0, len(batch))
            self._deliver(batch, out)
            inflight = nxt
            # A step boundary is a scheduling point: the writers of the
            # tokens just delivered, and requests that want to join, run
            # before the next step. The wait above need not suspend (cudaev
            # completes it inside its call when the GPU finishes within its
            # spin; a poller's first query may succeed), and without this the
            # engine would run step after step while no token reaches a client.
            await asyncio.sleep(0)

    def _deliver(self, batch, out):
        made = 0
        for seq, tok in zip(batch, out.tolist()):
            seq.pos += 1
            if seq.finish_reason is not None:  # cancelled while its step ran
                continue
            if seq.pos >= len(seq.prompt) and not seq.cancelled:
                seq.generated.append(tok)
                if seq.sink is None or not seq.queue.empty() or not seq.sink(tok):
                    seq.queue.put_nowait(tok)
                made += 1
                if len(seq.generated) >= seq.max_tokens:
                    self._finish(seq, "length")
        self.metrics.tokens += made
        self.running = [s for s in self.running if s.finish_reason is None]
