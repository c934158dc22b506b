"""The Python service on the GPU (--model-device cuda, PyTorch): answers
within 1e-5 relative of the reference under load for each --wait mode, and a
device fault answered 503 with the worker replaced and serving again.
Skipped without torch or a GPU; ``--wait cudaev`` is skipped without the
cudaev package. Runs under pytest, or as a script where pytest is missing:

  python3 examples/python_service/tests/test_gpu.py    (exit 0 all passed, 77 skipped)
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Server  # noqa: E402

TOL = 1e-5  # the C service's (CUBLAS_PEDANTIC_MATH, fp32 throughout)


class Skip(Exception):
    pass


def need_gpu(wait="executor"):
    try:
        import torch
    except ImportError:
        raise Skip("no torch")
    if not torch.cuda.is_available():
        raise Skip("no GPU")
    if wait == "cudaev":
        try:
            import cudaev  # noqa: F401
        except ImportError:
            raise Skip("no cudaev package")


def rel_err(y, ref):
    mag = float(np.abs(ref).max())
    return float(np.abs(y - ref).max()) / mag if mag else float(np.abs(y).max())


def load(wait, total=4000, conns=64, extra=()):
    need_gpu(wait)
    with Server(["--wait", wait, *extra], workers=2, device="cuda") as s:
        rng = np.random.default_rng(11)
        xs = rng.uniform(-1, 1, (total, s.model.inputs)).astype(np.float32)
        ref = s.model.forward(xs)
        per = total // conns

        def client(i):
            c = s.conn()
            out = []
            for k in range(i * per, (i + 1) * per):
                st, _, y, _ = s.infer(xs[k], raw=bool(k % 2), conn=c)
                out.append((k, st, y))
            c.close()
            return out
        with ThreadPoolExecutor(conns) as ex:
            res = [r for part in ex.map(client, range(conns)) for r in part]
        assert len(res) == per * conns
        assert all(st == 200 for _, st, _ in res), {st for _, st, _ in res}
        worst = max(rel_err(y, ref[k]) for k, _, y in res)
        assert worst <= TOL, f"relative error {worst:.3g} > {TOL}"
        m = s.metrics()
        assert m["infer_gpu_batch_seconds_count"] > 0
        assert s.stop() == 0
        return worst


def test_load_cudaev():
    run_pytest(load, "cudaev")


def test_load_executor():
    run_pytest(load, "executor")


def test_load_poll():
    run_pytest(load, "poll")


def load_op_by_op(wait):
    """The forward pass op by op (--cuda-graphs off) and eager batching."""
    return load(wait, extra=("--cuda-graphs", "off", "--eager-batch"))


def test_load_op_by_op():
    run_pytest(load_op_by_op, "cudaev")


def fault(wait):
    need_gpu(wait)
    with Server(["--wait", wait, "--fault-injection"], device="cuda") as s:
        x = np.full(s.model.inputs, 0.5, np.float32)
        st, _, y, _ = s.infer(x)
        assert st == 200 and rel_err(y, s.model.forward(x[None])[0]) <= TOL
        st, _, _, data = s.infer(x, headers={"X-Inject-Fault": "1"})
        assert st == 503 and b"device fault" in data, (st, data)
        t0 = time.monotonic()
        while True:
            try:
                st, _, y, _ = s.infer(x)
                if st == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() - t0 < 120, "the service did not come back"
            time.sleep(0.2)
        came_back = time.monotonic() - t0
        assert rel_err(y, s.model.forward(x[None])[0]) <= TOL
        assert s.metrics()["infer_process_restarts_total"] == 1
        assert s.stop() == 0
        return came_back


def test_fault_cudaev():
    run_pytest(fault, "cudaev")


def test_fault_executor():
    run_pytest(fault, "executor")


def run_pytest(fn, wait):
    try:
        fn(wait)
    except Skip as e:
        import pytest
        pytest.skip(str(e))


if __name__ == "__main__":
    failed = passed = 0
    for name, fn, wait in [("load", load, w) for w in ("cudaev", "executor", "poll")] + \
                          [("load --cuda-graphs off --eager-batch", load_op_by_op, "cudaev")] + \
                          [("fault", fault, w) for w in ("cudaev", "executor")]:
        try:
            v = fn(wait)
            passed += 1
            print(f"ok {name} --wait {wait}: "
                  f"{'max relative error %.3g' % v if name.startswith('load') else 'back in %.1f s' % v}",
                  flush=True)
        except Skip as e:
            print(f"skip {name} --wait {wait}: {e}", flush=True)
        except Exception as e:  # noqa: BLE001 (report and go on)
            failed += 1
            print(f"not ok {name} --wait {wait}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0 if passed else 77)
