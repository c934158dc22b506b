#!/usr/bin/env python3
"""The Python inference service: examples/inference_server's HTTP API and MLP
on aiohttp + uvloop + PyTorch, each batch awaited with ``cudaev.wait``; its
twins are this program with ``--wait executor`` or ``--wait poll``
(waiting.py). docs/python_service.md has the whole story.

  python3 examples/python_service/server.py --port 8080 --workers 4 \\
      --wait cudaev --model-device cuda

Processes: a master (standard library only: it never touches CUDA, so a
worker's context is its own) opens one listening socket per worker, all on the
same port with SO_REUSEPORT (the kernel spreads connections, as the C
service's --loop-threads), starts the workers, and keeps each worker's socket
so that connections wait in its backlog while a worker is replaced. A worker
that exits after a device fault it cannot clear (a sticky CUDA error kills
PyTorch's context) is started again on the same socket. SIGTERM/SIGINT: the
master closes its copies and passes the signal on; each worker stops
accepting, sends what is queued without waiting for the window, answers
everything in flight and exits 0 (1 after --drain-timeout, the rest 503); the
master exits 0 when every worker did.

Interface for other endpoints (decode.py, when it imports): ``make_app(cfg)``
calls ``decode.add_arguments(parser)`` through ``make_parser`` and
``decode.setup(app, cfg)`` after the service's routes; ``cfg.wait`` and
``waiting.wait_event(cfg, event)`` are the shared waits.

Thread: single-threaded asyncio in each worker; the master is one thread.
"""
import argparse
import asyncio
import os
import resource
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

HEADER_DEADLINES = "cudaev.header_deadlines"  # the app's slowclient.HeaderDeadlines
EXIT_RESTART = 75  # a worker asks to be replaced (EX_TEMPFAIL)
_SIGNALS = {signal.SIGTERM, signal.SIGINT}

try:
    import decode  # the decode loop's endpoint, when present
except ImportError:
    decode = None


def _positive(v):
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{v}': want a number >= 1")
    return n


def _natural(v):
    n = int(v)
    if n < 0:
        raise argparse.ArgumentTypeError(f"'{v}': want a number >= 0")
    return n


def _port(v):
    n = int(v)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"'{v}': want a port 0..65535")
    return n


def make_parser():
    p = argparse.ArgumentParser(
        prog="server.py", description="The MLP of examples/inference_server over HTTP, on "
        "aiohttp, with each batch awaited as --wait says.",
        epilog="Endpoints: POST /v1/infer (a JSON array of the model's inputs, or raw float32 "
               "with Content-Type application/octet-stream), GET /health, GET /metrics.")
    a = p.add_argument
    a("-l", "--listen", default="127.0.0.1", help="IPv4 address to listen on (default 127.0.0.1)")
    a("-p", "--port", type=_port, default=8080, help="TCP port (default 8080; 0 picks one)")
    a("--port-file", help="write the port there once every worker serves")
    a("--workers", type=_positive, default=1,
      help="worker processes, each with its own socket on the port (SO_REUSEPORT; default 1)")
    a("--wait", choices=("cudaev", "executor", "poll"), default="cudaev",
      help="how a batch is awaited: cudaev.wait (default), run_in_executor(None, "
           "event.synchronize), or a query() + sleep(0) poller")
    a("--cudaev-spin-us", type=int, default=None, metavar="US",
      help="--wait cudaev: how long cudaev's loop may poll a completion it expects soon "
           "(cudaev.set_spin; default: the library's, 50)")
    a("--cudaev-markers", choices=("events", "auto"), default=None,
      help="--wait cudaev: how cudaev's loop marks a batch's end (cudaev.set_markers; default: "
           "the package's, events; auto: a word in host memory where the batch is alone)")
    a("--model-device", choices=("cuda", "cpu"), default="cuda",
      help="cuda: PyTorch on the GPU (default); cpu: the reference on a worker thread")
    a("--cpu-impl", choices=("numpy", "torch"), default="numpy",
      help="--model-device cpu: numpy (default) or torch on the CPU")
    a("--cuda-device", type=_natural, default=0, help="the GPU's ordinal (default 0)")
    a("--loop", choices=("uvloop", "asyncio"), default="uvloop",
      help="event loop (default uvloop; asyncio's own when uvloop does not import)")
    a("--layers", default="64,256,256,16", help="inputs,hidden[,hidden],outputs")
    a("--weights", help="read the weights from FILE; if missing, generate and write it")
    a("--seed", type=_natural, default=1, help="seed of generated weights (default 1)")
    a("--max-batch", type=_positive, default=64, help="requests per batch (default 64)")
    a("--batch-window-us", type=_natural, default=200,
      help="the longest a request waits for others (default 200)")
    a("--eager-batch", action="store_true",
      help="send a partial batch at once when every open connection of the worker has its "
           "request waiting (none can come to fill the window)")
    a("--cuda-graphs", choices=("on", "off"), default="on",
      help="--model-device cuda: run the forward pass as a CUDA graph per batch-size bucket "
           "(on, default) or op by op")
    a("--streams", type=_positive, default=4, help="batches in flight per worker (default 4)")
    a("--cpu-delay-us", type=_natural, default=0,
      help="--model-device cpu: added time per batch, a GPU's (default 0)")
    a("--max-queue", type=_positive, default=8192,
      help="requests waiting for a batch before 503 (default 8192)")
    a("--deadline-ms", type=_positive, default=2000,
      help="not answered N ms after its body arrived: 504 (default 2000)")
    a("--header-deadline-ms", type=_positive, default=10000,
      help="the request line and headers must arrive within N ms of the connection's start "
           "(a later request on it: of its first byte), else 408 and the connection is closed "
           "(default 10000)")
    a("--body-deadline-ms", type=_positive, default=10000,
      help="the body must arrive within N ms of the headers, else 408 (default 10000)")
    a("--max-body", type=_natural, default=0,
      help="larger bodies get 413 (default: fits the input)")
    a("--connection-timeout", type=_positive, default=30,
      help="idle seconds before a kept-alive connection is closed (default 30)")
    a("--drain-timeout", type=float, default=10.0,
      help="on SIGTERM, how long in-flight requests may take before the rest get 503")
    a("--profile", metavar="DIR",
      help="run each worker under cProfile and write DIR/worker-<index>.pstats when it "
           "exits (where a request's CPU goes; slows the worker)")
    a("--fault-injection", action="store_true",
      help="X-Inject-Fault: 1 makes the request's batch fault on the device; "
           "sticky (cpu) makes the fault outlive the reset")
    # Set by the master for its workers.
    for hidden in ("--worker-fd", "--ready-fd", "--worker-index", "--restarts"):
        a(hidden, type=int, default=None if hidden.endswith("fd") else 0, help=argparse.SUPPRESS)
    if decode is not None and hasattr(decode, "add_arguments"):
        decode.add_arguments(p)
    return p


def make_app(cfg, model=None, metrics=None):
    """The aiohttp application of one worker: /v1/infer, /health, /metrics,
    then decode.setup(app, cfg) when decode.py imports, then the 404 for
    every other path. ``model`` defaults to what cfg says (model.py); the
    device is made at the app's start-up and closed at its cleanup."""
    from aiohttp import web

    import metrics as metrics_mod
    import model as model_mod
    import service
    import slowclient
    import waiting

    if model is None:
        model = model_mod.load_or_generate(cfg)
    if metrics is None:
        metrics = metrics_mod.Metrics(cfg.max_batch, cfg.worker_index, cfg.workers, cfg.wait,
                                      cfg.restarts)
    svc = service.Service(cfg, model, metrics)
    deadlines = slowclient.HeaderDeadlines(cfg.header_deadline_ms, metrics)
    app = web.Application(client_max_size=svc.max_body + 1, middlewares=[deadlines.middleware])
    app[service.SERVICE] = svc
    app[HEADER_DEADLINES] = deadlines
    svc.open_connections = lambda: len(deadlines.conns)

    async def start(app):
        waiting.prepare(cfg, need_cudaev=cfg.model_device == "cuda")
        if waiting.loop_metrics() is not None:
            svc.extra_metrics.append(waiting.loop_metrics)
        svc.start(make_device(cfg, model))

    async def cleanup(app):
        if svc.batcher is not None:
            svc.batcher.close()
        if svc.device is not None:
            svc.device.close()

    app.on_startup.append(start)
    app.on_cleanup.append(cleanup)
    r = app.router
    r.add_route("*", "/v1/infer", svc.infer)
    r.add_route("*", "/health", svc.health)
    r.add_route("*", "/metrics", svc.scrape)
    if decode is not None:
        decode.setup(app, cfg)
    r.add_route("*", "/{tail:.*}", svc.not_found)
    return app


def make_device(cfg, model):
    import batching
    if cfg.model_device == "cuda":
        return batching.TorchDevice(model, cfg)
    return batching.CpuDevice(model, cfg)


# ---- a worker -------------------------------------------------------------------

async def serve(cfg):
    """One worker: serves on the socket the master gave it until a signal
    (exit 0, or 1 when the drain gave up) or an unrecoverable device fault
    (exit EXIT_RESTART after its drain)."""
    from aiohttp import web

    import service
    loop = asyncio.get_running_loop()
    app = make_app(cfg)
    svc = app[service.SERVICE]
    runner = web.AppRunner(app, handle_signals=False, access_log=None,
                           keepalive_timeout=cfg.connection_timeout)
    await runner.setup()
    sock = socket.socket(fileno=cfg.worker_fd)
    server = await loop.create_server(app[HEADER_DEADLINES].wrap(runner.server), sock=sock,
                                      backlog=4096)
    stop = asyncio.Event()
    state = {"code": 0, "reason": "draining", "signals": 0}

    def on_signal():
        state["signals"] += 1
        if state["signals"] > 1:  # a second signal: give up the drain now
            state["gave_up"] = True
            if svc.batcher is not None:
                svc.batcher.fail_queued("draining")
                for t in list(svc.batcher.inflight):
                    t.cancel()
        stop.set()

    def on_unrecoverable(why):
        if state["code"] == 0 and not stop.is_set():
            print(f"worker {cfg.worker_index}: {why}: restarting", file=sys.stderr, flush=True)
            state["code"], state["reason"] = EXIT_RESTART, "restarting"
            stop.set()

    svc.on_unrecoverable = on_unrecoverable
    for s in _SIGNALS:
        loop.add_signal_handler(s, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    if cfg.ready_fd is not None:
        os.write(cfg.ready_fd, b"r")
        os.close(cfg.ready_fd)
    await stop.wait()
    server.close()  # stop accepting; the master's copy keeps the backlog for a successor
    ok = await svc.drain(cfg.drain_timeout, state["reason"])
    await runner.cleanup()
    # Closing the loop puts back the signals' default action (terminate): a
    # SIGTERM from the master from now on must not turn this exit into a kill.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    return state["code"] or (0 if ok and not state.get("gave_up") else 1)


def _die_with_master():
    """SIGTERM when the master dies, however it dies (PR_SET_PDEATHSIG): a
    worker never outlives it holding the port."""
    master = os.getppid()
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != master:  # it died before the call
        os.kill(os.getpid(), signal.SIGTERM)


def worker_main(cfg):
    _die_with_master()
    # Thousands of connections per worker: as many fds as the hard limit
    # allows, as the C service does.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if cfg.loop == "uvloop":
        try:
            import uvloop
            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
    prof = None
    if cfg.profile:
        import cProfile
        prof = cProfile.Profile(time.thread_time)  # CPU time: the loop's sleep is not counted
        prof.enable()
    try:
        code = asyncio.run(serve(cfg))
    except SystemExit as e:
        print(f"worker {cfg.worker_index}: {e}", file=sys.stderr, flush=True)
        code = 1
    if prof is not None:
        prof.disable()
        os.makedirs(cfg.profile, exist_ok=True)
        prof.dump_stats(os.path.join(cfg.profile, f"worker-{cfg.worker_index}.pstats"))
    sys.exit(code)


# ---- the master -----------------------------------------------------------------

def listen_socket(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((addr, port))
    s.listen(4096)
    s.set_inheritable(True)
    return s


class Master:
    def __init__(self, cfg, argv):
        self.cfg, self.argv = cfg, argv
        self.socks, self.procs, self.restarts = [], [], []
        self.stopping = False

    def spawn(self, i, wait_ready):
        """Starts worker i on its socket; with wait_ready, returns once it
        serves (ok) or died (not ok)."""
        fd = self.socks[i].fileno()
        cmd = [sys.executable, os.path.abspath(__file__)] + self.argv + [
            "--worker-fd", str(fd), "--worker-index", str(i), "--restarts", str(self.restarts[i])]
        if not wait_ready:
            p = subprocess.Popen(cmd, pass_fds=(fd,))
            p.started = time.monotonic()
            return p, True
        rfd, wfd = os.pipe()
        p = subprocess.Popen(cmd + ["--ready-fd", str(wfd)], pass_fds=(fd, wfd))
        os.close(wfd)
        ok = os.read(rfd, 1) == b"r"  # b"": it exited before serving
        os.close(rfd)
        p.started = time.monotonic()
        return p, ok

    def run(self):
        cfg = self.cfg
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS | {signal.SIGCHLD})
        try:
            self.socks.append(listen_socket(cfg.listen, cfg.port))
            port = self.socks[0].getsockname()[1]
            for _ in range(cfg.workers - 1):
                self.socks.append(listen_socket(cfg.listen, port))
        except OSError as e:
            print(f"server.py: cannot listen on {cfg.listen}:{cfg.port}: {e}", file=sys.stderr)
            return 1
        if cfg.weights and not os.path.exists(cfg.weights):
            import model  # numpy only: the workers then read one file
            try:
                model.load_or_generate(cfg)
            except (OSError, ValueError) as e:
                print(f"server.py: {e}", file=sys.stderr)
                return 1
        self.restarts = [0] * cfg.workers
        for i in range(cfg.workers):
            p, ok = self.spawn(i, True)
            self.procs.append(p)
            if not ok:
                print(f"server.py: worker {i} did not start (exit {p.wait()})", file=sys.stderr)
                self.stop_all()
                return 1
        if cfg.port_file:
            with open(cfg.port_file + ".tmp", "w") as f:
                f.write(f"{port}\n")
            os.replace(cfg.port_file + ".tmp", cfg.port_file)
        print(f"listening on http://{cfg.listen}:{port}: {cfg.workers} worker(s), --wait "
              f"{cfg.wait}, model on {cfg.model_device}", flush=True)
        return self.supervise()

    def stop_all(self):
        self.stopping = True
        for s in self.socks:
            s.close()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    def supervise(self):
        codes = {}
        sigs = _SIGNALS | {signal.SIGCHLD}
        while True:
            info = signal.sigwaitinfo(sigs)
            if info.si_signo in _SIGNALS:
                if self.stopping:  # a second signal: the workers give up their drain
                    for p in self.procs:
                        if p.poll() is None:
                            p.send_signal(signal.SIGTERM)
                else:
                    self.stop_all()
            for i, p in enumerate(self.procs):
                if i in codes or p.poll() is None:
                    continue
                rc = p.returncode
                if self.stopping:
                    codes[i] = 0 if rc in (0, EXIT_RESTART) else 1
                    continue
                self.restarts[i] += 1
                print(f"server.py: worker {i} exited ({rc}); starting it again "
                      f"(restart {self.restarts[i]})", file=sys.stderr, flush=True)
                if time.monotonic() - p.started < 1.0:
                    time.sleep(0.5)  # a worker that cannot start must not spin the master
                self.procs[i], _ = self.spawn(i, False)
            if self.stopping and len(codes) == len(self.procs):
                return 1 if any(codes.values()) else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = make_parser().parse_args(argv)
    try:
        import model
        model.parse_dims(cfg.layers)
    except ValueError as e:
        print(f"server.py: {e}", file=sys.stderr)
        return 1
    if cfg.worker_fd is not None:
        worker_main(cfg)
    return Master(cfg, argv).run()


if __name__ == "__main__":
    sys.exit(main())
